"""The LiveKit Agents adapter with the real livekit-agents classes (pinned in
tests/python/requirements.txt): real `UserInputTranscribedEvent`s emitted by a real
`AgentSession` (no room, no server), a real `ChatContext` / `ChatMessage` given to
`inject` as LiveKit gives them to `on_user_turn_completed`. primd is a recording
stand-in here; test_adapters_live.py runs the hook against primd. Not run here: a whole
voice turn through LiveKit's audio pipeline (it needs fake audio, VAD and STT plugins).
"""

import asyncio
import unittest

try:
    from livekit.agents import AgentSession, ChatContext
    from livekit.agents.voice.events import UserInputTranscribedEvent
    HAVE_LIVEKIT = True
except ImportError:  # pragma: no cover - reported as a skip
    HAVE_LIVEKIT = False

from primd_client.livekit_adapter import PrimdTurnHook
from primd_client.turns import HEADER, TurnFeeder
from standin import FILLER, StandInClient


def event(text, final):
    return UserInputTranscribedEvent(transcript=text, is_final=final)


@unittest.skipUnless(HAVE_LIVEKIT, "livekit-agents not installed (tests/python/requirements.txt)")
class LiveKitAdapter(unittest.TestCase):
    def test_events_become_turns_and_the_passages_join_the_turn_context(self):
        async def go():
            client = StandInClient()
            hook = PrimdTurnHook("unix:/unused", feeder=TurnFeeder("unix:/unused", "lk", client=client))
            session = AgentSession()
            hook.attach(session)
            session.emit("user_input_transcribed", event("when does", False))
            session.emit("user_input_transcribed", event("when does the museum open", False))
            session.emit("user_input_transcribed", event("When does the museum open", True))
            session.emit("user_input_transcribed", event("on sunday", False))
            session.emit("user_input_transcribed", event("on Sunday?", True))
            # What LiveKit does at end of turn: a copy of the agent's context with the
            # user's message, handed to on_user_turn_completed.
            turn_ctx = ChatContext.empty()
            turn_ctx.add_message(role="system", content="You are a museum guide.")
            new_message = turn_ctx.add_message(role="user", content="When does the museum open on Sunday?")
            result = await hook.inject(turn_ctx, new_message)
            await hook.aclose()
            return client.sent, result, turn_ctx

        sent, result, turn_ctx = asyncio.run(go())
        self.assertEqual(sent, [
            ("partial", "lk", 0, "when does"),
            ("partial", "lk", 0, "when does the museum open"),
            ("final", "lk", 0, "When does the museum open"),
            ("partial", "lk", 1, "When does the museum open on sunday"),
            ("final", "lk", 1, "When does the museum open on Sunday?"),
        ], "the turn's text matched the last final: its answer was used, nothing re-sent")
        self.assertEqual(result["turn"], 1)
        items = [m for m in turn_ctx.items if m.type == "message"]
        self.assertEqual([m.role for m in items], ["system", "user", "assistant"])
        self.assertTrue(items[-1].text_content.startswith(HEADER))
        self.assertIn("[1] About When does the museum open on Sunday?: "
                      "Answer for When does the museum open on Sunday?.", items[-1].text_content,
                      "primd's context, cited by the passage's title")
        self.assertNotIn(FILLER, items[-1].text_content, "the context, not the whole passage")

    def test_whole_passages_on_request_and_when_primd_sends_no_context(self):
        async def go(client, **options):
            hook = PrimdTurnHook("unix:/unused", feeder=TurnFeeder("unix:/unused", "lk", client=client),
                                 **options)
            turn_ctx = ChatContext.empty()
            msg = turn_ctx.add_message(role="user", content="Is there a cafe?")
            await hook.inject(turn_ctx, msg)
            return turn_ctx.items[-1].text_content

        whole = "[About Is there a cafe?] Filler about the museum. Answer for Is there a cafe?."
        self.assertIn(whole, asyncio.run(go(StandInClient(), evidence="passages")))
        self.assertIn(whole, asyncio.run(go(StandInClient(context=False))),
                      "context turned off on the daemon: the passages instead")
        with self.assertRaises(ValueError):
            PrimdTurnHook("unix:/unused", evidence="sentences")

    def test_turn_text_without_matching_final_is_asked_at_turn_end(self):
        async def go():
            client = StandInClient()
            hook = PrimdTurnHook("unix:/unused", feeder=TurnFeeder("unix:/unused", "lk", client=client))
            hook.attach(AgentSession())
            turn_ctx = ChatContext.empty()
            msg = turn_ctx.add_message(role="user", content="Is there a cafe?")
            await hook.inject(turn_ctx, msg)
            return client.sent, turn_ctx

        sent, turn_ctx = asyncio.run(go())
        self.assertEqual(sent, [("final", "lk", 0, "Is there a cafe?")])
        self.assertIn("Answer for Is there a cafe?", turn_ctx.items[-1].text_content)

    def test_when_ready_only_skips_rather_than_waits(self):
        async def go():
            client = StandInClient(answer=False)
            hook = PrimdTurnHook("unix:/unused", feeder=TurnFeeder("unix:/unused", "lk", client=client))
            session = AgentSession()
            hook.attach(session)
            session.emit("user_input_transcribed", event("Is there a cafe?", True))
            turn_ctx = ChatContext.empty()
            msg = turn_ctx.add_message(role="user", content="Is there a cafe?")
            got = await hook.inject(turn_ctx, msg, when_ready_only=True)
            return got, len(turn_ctx.items)

        got, n = asyncio.run(go())
        self.assertIsNone(got)
        self.assertEqual(n, 1, "no message added: the preemptive reply's context stays as it was")

    def test_no_passages_leaves_the_context_alone(self):
        async def go():
            hook = PrimdTurnHook("unix:/unused", feeder=TurnFeeder(
                "unix:/unused", "lk", client=StandInClient(answer=False)))
            turn_ctx = ChatContext.empty()
            msg = turn_ctx.add_message(role="user", content="hello")
            with self.assertLogs("primd_client", "WARNING"):
                await hook.inject(turn_ctx, msg)
            return len(turn_ctx.items)
        self.assertEqual(asyncio.run(go()), 1)


if __name__ == "__main__":
    unittest.main()
