#!/usr/bin/env python3
"""primd in a LiveKit Agents voice agent: transcripts go to primd as they come
(`user_input_transcribed`), the passages join the chat context in
`on_user_turn_completed`.

A real agent (LiveKit server, your STT/LLM/TTS plugins and their keys):

    python3 clients/python/examples/livekit_agent.py dev

Offline (no server, no keys): a real AgentSession emits the transcript events a
recognizer would produce, then the hook fills a real ChatContext as LiveKit passes it to
`on_user_turn_completed`; the context is printed, with primd's `context` (the best
sentences, as numbered sources `[1] Title: ...`; `offline --passages`: whole passages):

    demo/run    # once: builds target/release/primd and index/demo.idx (the museum demo)
    target/release/primd run --listen unix:/tmp/primd.sock --index index/demo.idx --input none &
    pip install './clients/python[livekit]'
    PRIMD=unix:/tmp/primd.sock python3 clients/python/examples/livekit_agent.py offline
"""

import asyncio
import os
import sys

from livekit.agents import Agent, AgentSession, ChatContext
from livekit.agents.voice.events import UserInputTranscribedEvent

from primd_client.livekit_adapter import PrimdTurnHook

PRIMD = os.environ.get("PRIMD", "unix:/run/primd/primd.sock")


class Guide(Agent):
    def __init__(self, hook):
        super().__init__(instructions="You are the museum's guide. Answer from the passages given.")
        self.hook = hook

    async def on_user_turn_completed(self, turn_ctx, new_message):
        await self.hook.inject(turn_ctx, new_message)


async def entrypoint(ctx):
    """The LiveKit worker's entrypoint: choose your own STT/LLM/TTS plugins."""
    from livekit.plugins import deepgram, openai, silero  # pip install livekit-plugins-...

    hook = PrimdTurnHook(PRIMD, session=f"livekit-{ctx.room.name}")
    session = AgentSession(stt=deepgram.STT(), llm=openai.LLM(), tts=openai.TTS(),
                           vad=silero.VAD.load())
    hook.attach(session)
    await session.start(agent=Guide(hook), room=ctx.room)


async def offline(evidence="context"):
    hook = PrimdTurnHook(PRIMD, session="livekit-offline", evidence=evidence)
    session = AgentSession()
    hook.attach(session)
    words = "Is there somewhere I can leave my coat?".split()
    for n in range(1, len(words)):
        session.emit("user_input_transcribed",
                     UserInputTranscribedEvent(transcript=" ".join(words[:n]), is_final=False))
        await asyncio.sleep(0.2)
    question = " ".join(words)
    session.emit("user_input_transcribed", UserInputTranscribedEvent(transcript=question, is_final=True))
    turn_ctx = ChatContext.empty()
    new_message = turn_ctx.add_message(role="user", content=question)
    await Guide(hook).on_user_turn_completed(turn_ctx, new_message)
    for item in turn_ctx.items:
        print(f"--- {item.role}\n{item.text_content}")
    await hook.aclose()


if __name__ == "__main__":
    if sys.argv[1:2] == ["offline"]:
        asyncio.run(offline("passages" if "--passages" in sys.argv else "context"))
    else:
        from livekit.agents import WorkerOptions, cli
        cli.run_app(WorkerOptions(entrypoint_fnc=entrypoint))
