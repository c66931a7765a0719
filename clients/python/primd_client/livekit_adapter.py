"""LiveKit Agents: primd's evidence in the chat context when the user's turn completes.

    hook = PrimdTurnHook("unix:/run/primd/primd.sock")

    class Assistant(Agent):
        async def on_user_turn_completed(self, turn_ctx, new_message):
            await hook.inject(turn_ctx, new_message)

    session = AgentSession(stt=..., llm=..., tts=..., vad=...)
    hook.attach(session)          # listens to "user_input_transcribed"

Interim transcripts become primd partials and every final transcript a primd final as
soon as the `user_input_transcribed` event fires, so primd has answered (about a
millisecond after the final) long before LiveKit's end-of-turn detection calls
`on_user_turn_completed`; `inject` then only collects the result (waiting at most
`timeout` when it is not there yet) and adds one message to `turn_ctx`: primd's
`context` as numbered sources (`evidence="context"`, the default; the passages when a
result has none) or the top whole passages (`evidence="passages"`).

Preemptive generation: LiveKit starts it from the agent's context as it was at the final
transcript and keeps it only if `on_user_turn_completed` leaves the context equivalent
(voice/agent_activity.py in livekit-agents 1.8). Adding passages there therefore makes
LiveKit discard the preemptive reply and generate again, now with the passages (the
documented RAG pattern). The hook keeps that regeneration cheap — no retrieval wait at
turn end — and `inject(..., when_ready_only=True)` skips the passages rather than
wait, for agents that value the preemptive reply more.

Low evidence (an off-topic question still gets passages from primd, flagged
`evidence: "low"`): `low_evidence="mark"` (the default) adds them under a header that
tells the LLM to say it does not know unless they answer the question; `"drop"` adds
nothing; `"keep"` ignores the flag. `min_confidence=0.7` judges by primd's `confidence`
with the hook's own threshold instead of the daemon's `low_evidence_threshold`.

Nothing is imported from livekit-agents: the hook works on the objects LiveKit hands it
(the event, the `ChatContext`, the `ChatMessage`), so importing it needs no LiveKit.
"""

import asyncio
import logging
import uuid

from .prompt import check_evidence
from .turns import TurnFeeder, check_policy, context_text

log = logging.getLogger("primd_client")


class PrimdTurnHook:
    """One LiveKit AgentSession (one user) ↔ one primd session. `context_tokens`: the
    context's budget per turn, in word pieces (None: the daemon's `--context-tokens`)."""

    def __init__(self, address, *, session=None, timeout=0.5, max_passages=3,
                 max_chars=1200, role="assistant", low_evidence="mark", min_confidence=None,
                 evidence="context", context_tokens=None, feeder=None):
        check_policy(low_evidence, min_confidence)
        check_evidence(evidence)
        self.evidence = evidence
        self.low_evidence = low_evidence
        self.min_confidence = min_confidence
        self.feeder = feeder or TurnFeeder(
            address, session or f"livekit-{uuid.uuid4().hex[:12]}", timeout=timeout,
            context_tokens=context_tokens)
        self.max_passages = max_passages
        self.max_chars = max_chars
        self.role = role
        self.last_result = None
        self._queue = None  # transcripts in event order, sent by one task
        self._worker = None

    def attach(self, agent_session):
        """Subscribes to the session's `user_input_transcribed` and `close` events."""
        agent_session.on("user_input_transcribed", self.on_user_input_transcribed)
        agent_session.on("close", lambda _ev: self._schedule_close())
        return self

    def on_user_input_transcribed(self, ev):
        """The event handler (LiveKit calls it synchronously on the event loop): queues
        the transcript; one task sends them to primd in order."""
        if self._queue is None:
            self._queue = asyncio.Queue(maxsize=256)
            self._worker = asyncio.get_running_loop().create_task(self._send_loop())
        item = (bool(ev.is_final), ev.transcript or "")
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:  # primd unreachable for a long turn: drop an interim
            if item[0]:
                self._queue.get_nowait()
                self._queue.task_done()
                self._queue.put_nowait(item)

    async def _send_loop(self):
        while True:
            is_final, text = await self._queue.get()
            try:
                if is_final:
                    await self.feeder.final(text)
                else:
                    await self.feeder.interim(text)
            except Exception:
                log.exception("sending a transcript to primd failed")
            finally:
                self._queue.task_done()

    async def _flush(self, timeout):
        if self._queue is not None:
            try:
                await asyncio.wait_for(self._queue.join(), timeout)
            except asyncio.TimeoutError:
                pass

    async def inject(self, turn_ctx, new_message, *, when_ready_only=False):
        """Call from `Agent.on_user_turn_completed`: adds the passages for
        `new_message` to `turn_ctx` (a `ChatContext`); returns primd's result or None."""
        await self._flush(self.feeder.timeout)
        text = new_message.text_content or ""
        if when_ready_only and not self.feeder.ready():
            self.feeder.end_user_turn()
            return None
        result = await self.feeder.result_for_text(text)
        self.feeder.end_user_turn()
        self.last_result = result
        body = context_text(result, self.max_passages, self.max_chars,
                            low_evidence=self.low_evidence,
                            min_confidence=self.min_confidence,
                            evidence=self.evidence) if result else None
        if body is not None:
            turn_ctx.add_message(role=self.role, content=body)
        return result

    def _schedule_close(self):
        try:
            asyncio.get_running_loop().create_task(self.aclose())
        except RuntimeError:
            pass

    async def aclose(self):
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None
        await self.feeder.close()
