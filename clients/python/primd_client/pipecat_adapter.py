"""Pipecat: a frame processor that puts primd's evidence into the LLM context.

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

What goes in: `evidence="context"` (the default) hands over primd's `context`, the best
sentences of the top passages within its token budget, as numbered sources
(`[1] Title: ...`); a result without `context` (turned off on the daemon) falls back to
the passages. `evidence="passages"`: the top `max_passages` whole passages, each cut to
`max_chars` characters (about four times the tokens, docs/context.md).

Low evidence (an off-topic question still gets passages from primd, flagged
`evidence: "low"`): `low_evidence="mark"` (the default) puts them in under a header that
tells the LLM to say it does not know unless they answer the question; `"drop"` leaves
them out (the previous turn's passages are removed all the same); `"keep"` ignores the
flag. `min_confidence=0.7` judges by primd's `confidence` with the adapter's own
threshold instead of the daemon's `low_evidence_threshold`.

Pipecat is imported here, not by `primd_client`, so the core package stays stdlib-only.
Written against pipecat-ai 1.14 (frames and aggregator source); `LLMMessagesAppendFrame`
is used where the transform frame does not exist.
"""

import asyncio
import uuid

try:
    from pipecat.frames import frames as _frames
    from pipecat.frames.frames import (
        CancelFrame,
        EndFrame,
        InterimTranscriptionFrame,
        SystemFrame,
        TranscriptionFrame,
        UserStoppedSpeakingFrame,
    )
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
except ImportError as e:  # a clear message instead of a bare "no module named pipecat"
    raise ImportError("primd_client.pipecat_adapter needs pipecat-ai: "
                      "pip install 'primd-client[pipecat]' (or pipecat-ai)") from e

from .prompt import check_evidence
from .turns import HEADER, TurnFeeder, check_policy, context_text

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
    final may wait for primd. `low_evidence` ("mark", "drop" or "keep") and
    `min_confidence` (None: primd's own `evidence`): what to do with passages primd
    is not confident about; `evidence` ("context" or "passages"): what is handed over
    (the module's docstring); `context_tokens`: the context's budget per turn, in word
    pieces (None: the daemon's `--context-tokens`, 128 by default).
    """

    def __init__(self, address, *, session=None, timeout=0.5, max_passages=3,
                 max_chars=1200, role="system", keep_previous=False, low_evidence="mark",
                 min_confidence=None, evidence="context", context_tokens=None, feeder=None,
                 **kwargs):
        check_policy(low_evidence, min_confidence)
        check_evidence(evidence)
        super().__init__(**kwargs)
        self.evidence = evidence
        self._owns_feeder = feeder is None  # a feeder passed in is closed by its owner
        self.feeder = feeder or TurnFeeder(
            address, session or f"pipecat-{uuid.uuid4().hex[:12]}", timeout=timeout,
            context_tokens=context_tokens)
        self.max_passages = max_passages
        self.max_chars = max_chars
        self.role = role
        self.keep_previous = keep_previous
        self.low_evidence = low_evidence
        self.min_confidence = min_confidence
        self.last_result = None
        self._inflight = None  # the task of a final waiting for primd

    def context_frame(self, result):
        """The frame that puts `result`'s passages into the context, or None. A result
        whose passages the low-evidence policy drops still removes the previous turn's
        passages (they answered another question)."""
        text = context_text(result, self.max_passages, self.max_chars,
                            low_evidence=self.low_evidence, min_confidence=self.min_confidence,
                            evidence=self.evidence)
        replace = _Transform is not None and not self.keep_previous
        if text is None:
            if replace and result and result.get("results"):
                return _Transform(transform=lambda msgs: [m for m in msgs if not is_primd_message(m)],
                                  run_llm=False)
            return None
        message = {"role": self.role, "content": text}
        if replace:
            return _Transform(transform=lambda msgs: replace_primd_message(msgs, message),
                              run_llm=False)
        return _Append(messages=[message], run_llm=False)

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if self._inflight is not None and not isinstance(frame, SystemFrame):
            # A final still waiting for primd (its wait survived an interruption):
            # frames after it keep their order behind it.
            await asyncio.shield(self._inflight)
        if isinstance(frame, InterimTranscriptionFrame):
            await self.feeder.interim(frame.text)
        elif isinstance(frame, TranscriptionFrame):
            # Shielded: an InterruptionFrame (the aggregator broadcasts one when the
            # user's turn starts, possibly on this very transcript) cancels the frame
            # in process; without primd this transcript would already have gone on,
            # so the wait for primd must not be the reason it is lost.
            self._inflight = asyncio.ensure_future(self._final(frame, direction))
            await asyncio.shield(self._inflight)
            return
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self.feeder.end_user_turn()
        elif isinstance(frame, (EndFrame, CancelFrame)) and self._owns_feeder:
            await self.feeder.close()
        await self.push_frame(frame, direction)

    async def _final(self, frame, direction):
        try:
            turn = await self.feeder.final(frame.text)
            result = await self.feeder.result(turn)
            self.last_result = result
            extra = self.context_frame(result) if result else None
            if extra is not None:
                await self.push_frame(extra, FrameDirection.DOWNSTREAM)
            await self.push_frame(frame, direction)
        finally:
            self._inflight = None
