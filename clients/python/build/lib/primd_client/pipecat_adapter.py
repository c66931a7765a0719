"""Pipecat: a frame processor that puts primd's passages into the LLM context.

Place it between the STT service and the user context aggregator:

    Pipeline([transport.input(), stt, PrimdRetrieval("unix:/run/primd/primd.sock"),
              user_aggregator, llm, tts, transport.output(), assistant_aggregator])

`InterimTranscriptionFrame`s become primd partials, each `TranscriptionFrame` a primd
final. Before the `TranscriptionFrame` goes on, the processor waits (at most `timeout`;
primd answers about a millisecond after the final because it searched while the user
spoke) and pushes an `LLMMessagesTransformFrame` that the user aggregator applies to
the context: the previous primd message is removed and one with this turn's passages
appended. The aggregator adds the user's message after it when the turn ends, so the
LLM runs with the passages right before the question. Everything passes through; if
primd is down or late the turn goes on without passages.

Pipecat is imported here, not by `primd_client`, so the core package stays stdlib-only.
Written against pipecat-ai 1.14 (frames and aggregator source); `LLMMessagesAppendFrame`
is used where the transform frame does not exist.
"""

import asyncio
import uuid

from pipecat.frames import frames as _frames
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from .turns import HEADER, TurnFeeder, context_text

_Transform = getattr(_frames, "LLMMessagesTransformFrame", None)
_Append = _frames.LLMMessagesAppendFrame


def is_primd_message(message):
    """True for a context message this processor wrote."""
    return isinstance(message, dict) and str(message.get("content", "")).startswith(HEADER)


def replace_primd_message(messages, new):
    """The context messages without earlier primd passages, `new` appended."""
    return [m for m in messages if not is_primd_message(m)] + [new]


class PrimdRetrieval(FrameProcessor):
    """Feeds the user's transcripts to primd and injects the passages per turn.

    `session`: the primd session (default: a fresh `pipecat-…` name per processor, i.e.
    per conversation). `role`: the role of the injected message ("system" by default;
    use "user" for LLMs that accept one system message only). `timeout`: how long a
    final may wait for primd.
    """

    def __init__(self, address, *, session=None, timeout=0.5, max_passages=3,
                 max_chars=1200, role="system", keep_previous=False, feeder=None, **kwargs):
        super().__init__(**kwargs)
        self._owns_feeder = feeder is None  # a feeder passed in is closed by its owner
        self.feeder = feeder or TurnFeeder(
            address, session or f"pipecat-{uuid.uuid4().hex[:12]}", timeout=timeout)
        self.max_passages = max_passages
        self.max_chars = max_chars
        self.role = role
        self.keep_previous = keep_previous
        self.last_result = None

    def context_frame(self, result):
        """The frame that puts `result`'s passages into the context, or None."""
        text = context_text(result, self.max_passages, self.max_chars)
        if text is None:
            return None
        message = {"role": self.role, "content": text}
        if _Transform is not None and not self.keep_previous:
            return _Transform(transform=lambda msgs: replace_primd_message(msgs, message),
                              run_llm=False)
        return _Append(messages=[message], run_llm=False)

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, InterimTranscriptionFrame):
            await self.feeder.interim(frame.text)
        elif isinstance(frame, TranscriptionFrame):
            # Shielded: an InterruptionFrame (the aggregator broadcasts one when the
            # user's turn starts, possibly on this very transcript) cancels the frame
            # in process; without primd this transcript would already have gone on,
            # so the wait for primd must not be the reason it is lost.
            await asyncio.shield(self._final(frame, direction))
            return
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self.feeder.end_user_turn()
        elif isinstance(frame, (EndFrame, CancelFrame)) and self._owns_feeder:
            await self.feeder.close()
        await self.push_frame(frame, direction)

    async def _final(self, frame, direction):
        turn = await self.feeder.final(frame.text)
        result = await self.feeder.result(turn)
        self.last_result = result
        extra = self.context_frame(result) if result else None
        if extra is not None:
            await self.push_frame(extra, FrameDirection.DOWNSTREAM)
        await self.push_frame(frame, direction)
