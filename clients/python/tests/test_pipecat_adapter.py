"""The Pipecat adapter with the real pipecat-ai classes (pinned in
tests/python/requirements.txt): real transcription frames through PrimdRetrieval in a
real pipeline, into the real user context aggregator. primd is a recording stand-in
here (the turn mapping); test_adapters_live.py runs the same processor against primd.
"""

import asyncio
import unittest

try:
    from pipecat.frames.frames import (
        InterimTranscriptionFrame,
        LLMMessagesTransformFrame,
        TranscriptionFrame,
        UserStoppedSpeakingFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator
    from pipecat.tests.utils import run_test

    from primd_client.pipecat_adapter import PrimdRetrieval, is_primd_message
    HAVE_PIPECAT = True
    import sys
    from loguru import logger  # pipecat's logger: only warnings in test output
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
except ImportError as e:  # pragma: no cover - reported as a skip
    HAVE_PIPECAT = False
    WHY = str(e)

from primd_client.turns import TurnFeeder
from standin import FILLER, StandInClient


def frames(*items):
    out = []
    for kind, text in items:
        cls = InterimTranscriptionFrame if kind == "interim" else TranscriptionFrame
        out.append(cls(text=text, user_id="alice", timestamp="2026-12-01T00:00:00Z"))
    return out


@unittest.skipUnless(HAVE_PIPECAT, "pipecat-ai not installed (tests/python/requirements.txt)")
class PipecatAdapter(unittest.TestCase):
    def processor(self, client, **options):
        return PrimdRetrieval("unix:/unused", feeder=TurnFeeder("unix:/unused", "pc", client=client),
                              **options)

    def handed_over(self, client, **options):
        """The primd message the processor puts into the context for one final."""
        down, _ = asyncio.run(run_test(
            self.processor(client, **options), frames_to_send=frames(("final", "Where is the cafe?")),
            expected_down_frames=[LLMMessagesTransformFrame, TranscriptionFrame]))
        return down[0].transform([])[0]["content"]

    def test_passages_frame_goes_down_before_the_transcription(self):
        client = StandInClient()
        proc = self.processor(client)
        down, _ = asyncio.run(run_test(
            proc,
            frames_to_send=frames(("interim", "can I bring"), ("interim", "can I bring my dog"),
                                  ("final", "Can I bring my dog?")),
            expected_down_frames=[InterimTranscriptionFrame, InterimTranscriptionFrame,
                                  LLMMessagesTransformFrame, TranscriptionFrame]))
        self.assertEqual([s[0] for s in client.sent], ["partial", "partial", "final"])
        self.assertEqual(client.sent[-1][2:], (0, "Can I bring my dog?"))
        msgs = down[2].transform([{"role": "user", "content": "hi"}])
        self.assertEqual(msgs[0], {"role": "user", "content": "hi"})
        self.assertTrue(is_primd_message(msgs[1]))
        self.assertIn("[1] About Can I bring my dog?: Answer for Can I bring my dog?.",
                      msgs[1]["content"], "primd's context, cited by the passage's title")
        self.assertNotIn(FILLER, msgs[1]["content"], "the context, not the whole passage")
        self.assertFalse(down[2].run_llm, "the aggregator, not the processor, runs the LLM")

    def test_whole_passages_on_request_and_when_primd_sends_no_context(self):
        whole = "[About Where is the cafe?] Filler about the museum. Answer for Where is the cafe?."
        self.assertIn(whole, self.handed_over(StandInClient(), evidence="passages"))
        self.assertIn(whole, self.handed_over(StandInClient(context=False)),
                      "context turned off on the daemon: the passages instead")
        with self.assertRaises(ValueError):
            self.processor(StandInClient(), evidence="sentences")

    def test_no_answer_no_frame_and_the_transcription_still_passes(self):
        proc = self.processor(StandInClient(answer=False))
        with self.assertLogs("primd_client", "WARNING"):
            asyncio.run(run_test(proc, frames_to_send=frames(("final", "hello")),
                                 expected_down_frames=[TranscriptionFrame]))

    def test_real_user_aggregator_holds_one_primd_message_per_turn(self):
        # Two user turns, each a pipeline run (frames sent at once would let the
        # aggregator's turn-start interruption flush the queued second turn, which a
        # live conversation's pauses never do); the context and the primd session
        # carry over like in one long conversation.
        context = LLMContext(messages=[{"role": "system", "content": "You are a museum guide."}])
        client = StandInClient()
        feeder = TurnFeeder("unix:/unused", "pc", client=client)
        for turn in [(("interim", "where is"), ("final", "Where is the cloakroom?")),
                     (("final", "And the toilets?"),)]:
            proc = PrimdRetrieval("unix:/unused", feeder=feeder)
            asyncio.run(run_test(Pipeline([proc, LLMUserAggregator(context)]),
                                 frames_to_send=frames(*turn)))
        roles = [(m["role"], is_primd_message(m)) for m in context.messages]
        self.assertEqual(roles, [("system", False), ("user", False), ("system", True), ("user", False)],
                         "the earlier passages replaced, this turn's right before the question")
        self.assertEqual(context.messages[1]["content"], "Where is the cloakroom?")
        self.assertIn("Answer for And the toilets?", context.messages[2]["content"])
        self.assertNotIn("Where is the cloakroom", context.messages[2]["content"])
        self.assertEqual(context.messages[3]["content"], "And the toilets?")
        # The aggregator's UserStoppedSpeakingFrame (sent upstream) ended the first
        # user turn, so the second one did not carry the first question as prefix.
        self.assertEqual(client.sent[-1], ("final", "pc", 1, "And the toilets?"))


if __name__ == "__main__":
    unittest.main()
