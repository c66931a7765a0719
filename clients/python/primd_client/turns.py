"""A recognizer's interim and final transcripts → primd turns, for the adapters.

Agent frameworks hand over a user's speech as interim transcripts (the hypothesis of
the current STT segment) and finals (one per segment; a user turn can hold several).
primd wants, per (session, turn), the whole text so far. This class keeps that mapping
once for both adapters: each STT final becomes a primd final of everything the user
said in this user turn so far, so the result at the end of the turn is about the whole
question; the next segment's interims continue on the next primd turn with the earlier
segments as prefix. It never lets a primd problem stall the agent: every wait has a
timeout, a lost connection is logged and retried on the next turn, and the answer is
then None (the agent goes on without passages).
"""

import logging
import time

from .aio import AsyncClient
from .prompt import check_evidence, sources, sources_text
from .protocol import PrimdError, check_context_tokens, passages_text
from .results import (  # noqa: F401 (LOW_EVIDENCE_POLICIES re-exported)
    LOW_EVIDENCE_POLICIES, check_policy, is_low_evidence, parse_context)

log = logging.getLogger("primd_client")


def _norm(text):
    return " ".join(text.split()).lower()


class TurnFeeder:
    """One conversation (one primd session) of an agent."""

    def __init__(self, address, session, *, timeout=0.5, retry_s=2.0, connect_timeout=2.0,
                 client=None, context_tokens=None):
        self.address = address
        self.session = session
        self.timeout = timeout
        check_context_tokens(context_tokens)
        self.context_tokens = context_tokens  # each final's `context` budget (None: primd's)
        self.retry_s = retry_s
        self.connect_timeout = connect_timeout
        self._client = client
        self._next_retry = 0.0
        self._turn = 0  # the primd turn the next transcript goes to
        self._segments = []  # STT finals of the current user turn
        self._last_final = None  # (turn, text) of the newest final sent
        self.errors = 0

    async def _get(self):
        if self._client is not None and not self._client.closed:
            return self._client
        self._client = None
        now = time.monotonic()
        if now < self._next_retry:
            return None
        try:
            self._client = await AsyncClient.connect(self.address, timeout=self.connect_timeout)
        except (PrimdError, OSError) as e:
            self._next_retry = now + self.retry_s
            self.errors += 1
            log.warning("primd at %s unreachable, going on without passages: %s", self.address, e)
            return None
        return self._client

    async def _send(self, kind, turn, text):
        client = await self._get()
        if client is None:
            return False
        try:
            if kind == "final" and self.context_tokens is not None:
                await client.final(self.session, turn, text, context_tokens=self.context_tokens)
            else:
                await getattr(client, kind)(self.session, turn, text)
            return True
        except PrimdError as e:
            self.errors += 1
            log.warning("primd %s failed: %s", kind, e)
            return False

    def _text(self, interim=""):
        return " ".join(s for s in [*self._segments, interim.strip()] if s)

    async def interim(self, text):
        """An interim transcript of the current STT segment."""
        if text.strip():
            await self._send("partial", self._turn, self._text(text))

    async def final(self, text):
        """An STT final: ends this primd turn with everything said in the user turn so
        far. Returns the primd turn number (to pass to `result`)."""
        if not text.strip():
            return None
        self._segments.append(text.strip())
        turn, whole = self._turn, self._text()
        self._turn += 1
        if await self._send("final", turn, whole):
            self._last_final = (turn, whole)
            return turn
        return None

    def end_user_turn(self):
        """The framework decided the user's turn is over: the next speech starts afresh."""
        self._segments = []

    def ready(self):
        """True when the newest final's result has already arrived."""
        return (self._client is not None and self._last_final is not None
                and self._client.result_ready(self.session, self._last_final[0]))

    async def result(self, turn, timeout=None):
        """primd's final result for `turn`, or None (no connection, timeout, abandoned)."""
        if turn is None or self._client is None:
            return None
        try:
            return await self._client.wait_final(self.session, turn,
                                                 self.timeout if timeout is None else timeout)
        except PrimdError as e:
            self.errors += 1
            log.warning("no passages for turn %s: %s", turn, e)
            return None

    async def result_for_text(self, text, timeout=None):
        """The result for a whole user turn whose text the framework reports at its end:
        the newest final's result when it was for this text (the usual case: already
        there), else a new primd turn with this text as its final."""
        if self._last_final is not None and _norm(self._last_final[1]) == _norm(text):
            turn = self._last_final[0]
        else:
            self._segments = []
            turn = await self.final(text)
        self._last_final = None
        return await self.result(turn, timeout)

    async def reset(self):
        """Forgets the conversation primd keeps for this session (the agent's chat was
        cleared): the next turn is retrieved alone. False when not connected."""
        if self._client is None:
            return False
        try:
            await self._client.reset(self.session)
            return True
        except Exception:  # noqa: BLE001 - a reset must never break the agent
            return False

    async def topic(self, text=None, passage=None):
        """Tells primd what the agent just answered about (a `text`, or the id of a
        `passage` it used; neither clears it): the session's next follow-ups are searched
        with it. Returns the topic primd kept, or None (cleared, not connected, failed)."""
        if self._client is None:
            return None
        try:
            return await self._client.topic(self.session, text=text, passage=passage)
        except Exception:  # noqa: BLE001 - a topic must never break the agent
            return None

    async def close(self):
        if self._client is not None:
            await self._client.close()
            self._client = None


HEADER = "Passages retrieved for the user's question (use them if relevant):"

# The header of passages primd flagged as low evidence (policy "mark"): it starts with
# HEADER, so the adapters recognise (and replace) their own messages either way.
LOW_EVIDENCE_HEADER = (
    HEADER + "\nLow evidence: primd found no passage that clearly answers this question "
    "(it may be off topic for this corpus). If these passages do not answer it, say you "
    "don't know; do not guess from them.")


def context_text(result, max_passages=3, max_chars=1200, header=HEADER, *,
                 low_evidence="mark", min_confidence=None, low_header=LOW_EVIDENCE_HEADER,
                 evidence="context"):
    """The text an adapter puts into the LLM's context for a final result, or None
    when there is nothing to put there: no passages, or low evidence
    ([`is_low_evidence`]) under the policy "drop". Under "mark" (the default) low-evidence
    passages come under LOW_EVIDENCE_HEADER, which tells the LLM to say it does not
    know rather than answer from them (`low_header`); "keep" ignores the evidence.

    `evidence="context"` (the default) hands over primd's `context`, the best sentences
    within its token budget, as numbered sources (`[1] Title: ...`, prompt.py); a result
    without one (context turned off) falls back to the passages. `evidence="passages"`:
    the top `max_passages` whole passages, each cut to `max_chars` characters."""
    check_policy(low_evidence, min_confidence)
    check_evidence(evidence)
    low = low_evidence != "keep" and is_low_evidence(result, min_confidence)
    if low and low_evidence == "drop":
        return None
    ctx = parse_context((result or {}).get("context")) if evidence == "context" else None
    body = sources_text(sources(result, None)) if ctx is not None and ctx.text.strip() else ""
    if not body:  # asked for passages, or the result has no context
        body = passages_text(result, max_passages=max_passages, max_chars=max_chars)
    if not body:
        return None
    return f"{low_header if low else header}\n\n{body}"
