"""What the adapters do with passages primd is not confident about (`evidence: "low"`):
the shared policy of turns.py, then each adapter with its real framework classes and a
stand-in primd (test_adapters_live.py runs them against the real daemon)."""

import asyncio
import unittest

from primd_client.turns import (
    HEADER, LOW_EVIDENCE_HEADER, TurnFeeder, context_text, is_low_evidence)
from standin import FILLER, StandInClient, final_result

try:
    from pipecat.frames.frames import LLMMessagesTransformFrame, TranscriptionFrame
    from pipecat.tests.utils import run_test

    from primd_client.pipecat_adapter import PrimdRetrieval, is_primd_message
    HAVE_PIPECAT = True
    import sys
    from loguru import logger  # pipecat's logger: only warnings in test output
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
except ImportError:  # pragma: no cover - reported as a skip
    HAVE_PIPECAT = False

try:
    from livekit.agents import ChatContext
    HAVE_LIVEKIT = True
except ImportError:  # pragma: no cover - reported as a skip
    HAVE_LIVEKIT = False

from primd_client.livekit_adapter import PrimdTurnHook


def result(evidence=None, confidence=None, passages=2):
    r = {"type": "final", "results": [{"id": f"p{i}", "title": f"T{i}", "text": f"text {i}"}
                                      for i in range(passages)]}
    if evidence is not None:
        r["evidence"] = evidence
    if confidence is not None:
        r["confidence"] = confidence
    return r


class Policy(unittest.TestCase):
    def test_low_evidence_is_marked_by_default(self):
        ok = context_text(result("ok", 0.9))
        low = context_text(result("low", 0.1))
        self.assertTrue(ok.startswith(HEADER + "\n\n"), ok)
        self.assertTrue(low.startswith(LOW_EVIDENCE_HEADER + "\n\n"), low)
        self.assertIn("say you don't know", low)
        self.assertIn("[T0] text 0", low, "the passages are still there, marked")

    def test_drop_leaves_the_passages_out_and_keep_ignores_the_flag(self):
        self.assertIsNone(context_text(result("low", 0.1), low_evidence="drop"))
        self.assertIsNotNone(context_text(result("ok", 0.9), low_evidence="drop"))
        self.assertTrue(context_text(result("low", 0.1), low_evidence="keep").startswith(HEADER + "\n\n"))

    def test_min_confidence_is_the_adapters_own_threshold(self):
        r = result("ok", 0.6)
        self.assertFalse(is_low_evidence(r))
        self.assertTrue(is_low_evidence(r, min_confidence=0.7))
        self.assertFalse(is_low_evidence(result("low", 0.3), min_confidence=0.2))
        self.assertTrue(is_low_evidence(result("ok"), min_confidence=0.2), "no confidence: low")
        self.assertIsNone(context_text(r, low_evidence="drop", min_confidence=0.7))

    def test_low_evidence_marks_the_context_the_same_way(self):
        r = {**final_result("what is the capital of France"), "evidence": "low"}
        text = context_text(r)
        self.assertTrue(text.startswith(LOW_EVIDENCE_HEADER + "\n\n"), text)
        self.assertIn("[1] About what is the capital of France: Answer for", text)
        self.assertNotIn(FILLER, text, "the context, not the whole passage")
        self.assertIsNone(context_text(r, low_evidence="drop"))

    def test_a_result_without_the_field_is_ok_and_bad_settings_are_refused(self):
        self.assertFalse(is_low_evidence(result()))
        with self.assertRaises(ValueError):
            context_text(result(), low_evidence="hide")
        with self.assertRaises(ValueError):
            PrimdTurnHook("unix:/unused", min_confidence=2)


def feeder(**verdict):
    return TurnFeeder("unix:/unused", "s", client=StandInClient(**verdict))


@unittest.skipUnless(HAVE_PIPECAT, "pipecat-ai not installed (tests/python/requirements.txt)")
class PipecatPolicy(unittest.TestCase):
    def final(self, proc):
        frame = TranscriptionFrame(text="what is the capital of France", user_id="u", timestamp="")
        down, _ = asyncio.run(run_test(proc, frames_to_send=[frame],
                                       expected_down_frames=[LLMMessagesTransformFrame,
                                                             TranscriptionFrame]))
        return down[0].transform([{"role": "system", "content": "guide"},
                                  {"role": "system", "content": HEADER + "\n\nold passages"}])

    def test_low_evidence_passages_are_marked(self):
        msgs = self.final(PrimdRetrieval("unix:/unused", feeder=feeder(evidence="low", confidence=0.03)))
        self.assertEqual(len(msgs), 2, "the previous turn's passages replaced")
        self.assertTrue(msgs[1]["content"].startswith(LOW_EVIDENCE_HEADER), msgs[1])
        self.assertTrue(is_primd_message(msgs[1]))

    def test_drop_removes_the_previous_passages_and_adds_none(self):
        proc = PrimdRetrieval("unix:/unused", low_evidence="drop",
                              feeder=feeder(evidence="low", confidence=0.03))
        self.assertEqual(self.final(proc), [{"role": "system", "content": "guide"}])

    def test_min_confidence_flags_what_primd_called_ok(self):
        proc = PrimdRetrieval("unix:/unused", min_confidence=0.8,
                              feeder=feeder(evidence="ok", confidence=0.6))
        self.assertTrue(self.final(proc)[1]["content"].startswith(LOW_EVIDENCE_HEADER))


@unittest.skipUnless(HAVE_LIVEKIT, "livekit-agents not installed (tests/python/requirements.txt)")
class LiveKitPolicy(unittest.TestCase):
    def inject(self, hook):
        async def go():
            turn_ctx = ChatContext.empty()
            msg = turn_ctx.add_message(role="user", content="what is the capital of France")
            await hook.inject(turn_ctx, msg)
            await hook.aclose()
            return [m.text_content for m in turn_ctx.items]
        return asyncio.run(go())

    def test_low_evidence_passages_are_marked_or_dropped(self):
        marked = self.inject(PrimdTurnHook("unix:/unused", feeder=feeder(evidence="low", confidence=0.03)))
        self.assertEqual(len(marked), 2)
        self.assertTrue(marked[1].startswith(LOW_EVIDENCE_HEADER), marked[1])
        dropped = self.inject(PrimdTurnHook("unix:/unused", low_evidence="drop",
                                            feeder=feeder(evidence="low", confidence=0.03)))
        self.assertEqual(len(dropped), 1)
        kept = self.inject(PrimdTurnHook("unix:/unused", feeder=feeder(evidence="ok", confidence=0.9)))
        self.assertTrue(kept[1].startswith(HEADER + "\n\n"), kept[1])


if __name__ == "__main__":
    unittest.main()
