"""Both adapters end to end: the real framework classes, the real `primd run --listen`
(demo index, real model). A recognizer's interim and final transcripts of a demo
question go in; primd's `context` from the right document comes out in the LLM's
context, cited by its title (whole passages when asked: `evidence="passages"`)."""

import asyncio
import unittest

from primd_client.prompt import sources, sources_text
from primd_server import SharedPrimd, grow

try:
    from pipecat.frames.frames import InterimTranscriptionFrame, TranscriptionFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator
    from pipecat.tests.utils import run_test

    from primd_client.pipecat_adapter import PrimdRetrieval, is_primd_message
    HAVE_PIPECAT = True
except ImportError:
    HAVE_PIPECAT = False

try:
    from livekit.agents import AgentSession, ChatContext
    from livekit.agents.voice.events import UserInputTranscribedEvent

    from primd_client.livekit_adapter import PrimdTurnHook
    HAVE_LIVEKIT = True
except ImportError:
    HAVE_LIVEKIT = False

QUESTION = "Is there somewhere I can leave my coat and, uh, my backpack?"
TITLE = "Lockers and cloakroom"


def body(message):
    """What an adapter's message holds below its header."""
    return message.split("\n\n", 1)[1]


class Live(SharedPrimd):
    @unittest.skipUnless(HAVE_PIPECAT, "pipecat-ai not installed")
    def test_pipecat_processor(self):
        context = LLMContext(messages=[{"role": "system", "content": "You are the museum's guide."}])
        proc = PrimdRetrieval(self.primd.address, session="pipecat-live", timeout=60)
        frames = [InterimTranscriptionFrame(text=t, user_id="v", timestamp="") for t in grow(QUESTION)]
        frames.append(TranscriptionFrame(text=QUESTION, user_id="v", timestamp=""))
        asyncio.run(run_test(Pipeline([proc, LLMUserAggregator(context)]), frames_to_send=frames))
        roles = [(m["role"], is_primd_message(m)) for m in context.messages]
        self.assertEqual(roles, [("system", False), ("system", True), ("user", False)])
        handed = body(context.messages[1]["content"])
        self.assertTrue(handed.startswith(f"[1] {TITLE}: "), "the right passage first")
        self.assertEqual(handed, sources_text(sources(proc.last_result, None)),
                         "primd's context, as numbered sources")
        self.assertEqual(context.messages[2]["content"], QUESTION)
        self.assertEqual(proc.last_result["session"], "pipecat-live")

    @unittest.skipUnless(HAVE_LIVEKIT, "livekit-agents not installed")
    def test_livekit_hook(self):
        async def go(evidence="context", name="livekit-live", **options):
            hook = PrimdTurnHook(self.primd.address, session=name, timeout=60, evidence=evidence,
                                 **options)
            session = AgentSession()
            hook.attach(session)
            for t in grow(QUESTION):
                session.emit("user_input_transcribed", UserInputTranscribedEvent(transcript=t, is_final=False))
            session.emit("user_input_transcribed", UserInputTranscribedEvent(transcript=QUESTION, is_final=True))
            turn_ctx = ChatContext.empty()
            msg = turn_ctx.add_message(role="user", content=QUESTION)
            result = await hook.inject(turn_ctx, msg)
            await hook.aclose()
            return result, turn_ctx

        result, turn_ctx = asyncio.run(go())
        self.assertEqual((result["session"], result["turn"], result["text"]), ("livekit-live", 0, QUESTION))
        self.assertEqual([m.role for m in turn_ctx.items], ["user", "assistant"])
        handed = body(turn_ctx.items[1].text_content)
        self.assertTrue(handed.startswith(f"[1] {TITLE}: "), handed)
        self.assertEqual(handed, sources_text(sources(result, None)))
        small, turn_ctx = asyncio.run(go(name="livekit-live-3", context_tokens=16))
        self.assertLessEqual(small["context"]["tokens"], 16, "the hook's own budget")
        self.assertLess(len(body(turn_ctx.items[1].text_content)), len(handed))
        result, turn_ctx = asyncio.run(go("passages", "livekit-live-2"))
        whole = result["results"][0]["text"].strip()
        self.assertTrue(body(turn_ctx.items[1].text_content).startswith(f"[{TITLE}] {whole[:1000]}"),
                        "evidence='passages': the whole top passage")


if __name__ == "__main__":
    unittest.main()
