"""A primd result → the messages of an OpenAI-style chat-completions request.

Why: `context` (docs/context.md) exists so that a small LLM reads ~100 tokens of the
best sentences instead of ~400 of whole passages, but an agent still has to turn it into
a prompt: number the sources so the LLM can cite them, tell it what to do when primd is
not confident (`evidence: "low"`), and keep the prompt under the LLM's budget. This
module does that once, for results of the sync and the asyncio client alike (plain
dicts are fine too), with no dependency:

    messages = prompt_messages(result)              # [system (sources), user (question)]
    reply = chat("http://127.0.0.1:8080/v1", messages)   # llm.py: llama.cpp, Ollama, ...

Sources are the context's passages, numbered in rank order, each `[n] Title: sentences`.
A result without `context` (context turned off, `context_tokens: 0`) gets its top
passages instead, cut to the cap; an index built before format 6 sends whole passages
as its context (`unit: "passages"`), which the cap cuts likewise.

The cap (`max_tokens`, on the sources) uses `estimate_tokens`, a cheap estimate with no
tokenizer: the larger of one token per 4 characters (the usual rule for English) and
one per word or punctuation mark (numbers and times: "10:30" is three). primd's own
`context.tokens` counts word pieces, about 1.05 GPT-style tokens each (docs/context.md).
"""

import math
import re
from dataclasses import dataclass
from typing import List

from .results import check_policy, is_low_evidence, parse_context, titles

DEFAULT_MAX_TOKENS = 256
"""The default cap on the sources, in estimated LLM tokens (primd's default context is
128 word pieces, so it is never cut; three whole passages are)."""

INSTRUCTIONS = (
    "You are a voice assistant. Answer the user's question from the numbered sources "
    "below, in one or two short sentences that sound natural when spoken. Cite the "
    "sources you used by number, like [1]. If the sources do not answer the question, "
    "say you don't know.")

LOW_EVIDENCE = (
    "Low evidence: the retriever found no source that clearly answers this question (it "
    "may be off topic, or misheard). Unless a source below answers it, say you don't "
    "know or ask the user to rephrase; do not guess.")

NO_SOURCES = (
    "No sources were found for this question. Say you don't know, or ask the user to "
    "rephrase; do not guess.")

EVIDENCE_KINDS = ("context", "passages")

_PIECE = re.compile(r"\w+|[^\w\s]")


def estimate_tokens(text):
    """About how many tokens an LLM's tokenizer makes of `text` (module docstring)."""
    if not text:
        return 0
    return max(math.ceil(len(text) / 4), len(_PIECE.findall(text)))


def cut_to_tokens(text, max_tokens):
    """`text` cut at a word boundary to at most `max_tokens` estimated tokens, with " …"
    when cut; "" when not even one word fits."""
    if estimate_tokens(text) <= max_tokens:
        return text
    words = text.split(" ")
    lo, hi = 0, len(words)  # the longest prefix of words (plus " …") that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(" ".join(words[:mid]) + " …") <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]).rstrip() + " …" if lo else ""


@dataclass(frozen=True)
class Source:
    """One numbered source of a prompt: `number` (1-based, the citation), the passage's
    `title` (its id when it has none), `passage` id and `chunk`, and the `text` given."""

    number: int
    title: str
    passage: str
    chunk: int
    text: str

    def line(self):
        return f"[{self.number}] {self.title}: {self.text}" if self.title else f"[{self.number}] {self.text}"


def check_evidence(evidence):
    if evidence not in EVIDENCE_KINDS:
        raise ValueError(f"evidence={evidence!r}: expected one of {', '.join(EVIDENCE_KINDS)}")


def sources(result, max_tokens=DEFAULT_MAX_TOKENS, *, evidence="context", max_passages=3,
            max_chars=1200):
    """The numbered sources of a result, best first, within `max_tokens` (None: no cap):
    the context's passages (`evidence="context"`, when the result has a context), else
    the top `max_passages` passages, each cut to `max_chars` characters. The sources
    are taken in order while they fit; the first that does not is cut, the rest left out."""
    check_evidence(evidence)
    result = result or {}
    names = titles(result)
    ctx = parse_context(result.get("context")) if evidence == "context" else None
    if ctx is not None and ctx.text.strip():
        groups = ctx.passages() if ctx.spans else [(("", 0), ctx.text)]
    else:
        groups = []
        for r in (result.get("results") or [])[:max_passages]:
            text = " ".join((r.get("text") or "").split())
            if len(text) > max_chars:
                text = text[:max_chars].rsplit(" ", 1)[0] + " …"
            groups.append(((str(r.get("id", "")), int(r.get("chunk") or 0)), text))
    out, left = [], max_tokens
    for (pid, chunk), text in groups:
        text = " ".join(text.split())
        if not text:
            continue
        title = names.get((pid, chunk)) or pid
        head = Source(len(out) + 1, title, pid, chunk, "").line()
        cut = False
        if left is not None:
            room = left - estimate_tokens(head) - 1  # the line break before it
            fitted = cut_to_tokens(text, room) if room > 0 else ""
            if not fitted:
                break
            cut, text = fitted != text, fitted
            left = room - estimate_tokens(text)
        out.append(Source(len(out) + 1, title, pid, chunk, text))
        if cut:
            break
    return out


def sources_text(items):
    """Sources as the lines an LLM reads: `[n] Title: text`, one per line."""
    return "\n".join(s.line() for s in items)


@dataclass(frozen=True)
class Prompt:
    """`messages` for a chat-completions request, the `sources` they cite (to show
    `[n]` as a title), and whether the result was judged low evidence."""

    messages: List[dict]
    sources: List[Source]
    low_evidence: bool


def build_prompt(result, question=None, *, instructions=INSTRUCTIONS,
                 max_tokens=DEFAULT_MAX_TOKENS, evidence="context", low_evidence="mark",
                 min_confidence=None, history=(), max_passages=3) -> Prompt:
    """The prompt for a final result: a system message (`instructions`, the low-evidence
    instruction when it applies, the numbered sources within `max_tokens`), then
    `history` (earlier chat messages, as given), then the user's `question` (default:
    the result's final transcript, `result["text"]`).

    Low evidence (`evidence: "low"`, or `confidence` below `min_confidence` when given)
    under `low_evidence="mark"` (default) adds LOW_EVIDENCE before the sources; `"drop"`
    leaves the sources out and tells the LLM there are none; `"keep"` ignores it."""
    check_policy(low_evidence, min_confidence)
    result = result or {}
    low = low_evidence != "keep" and is_low_evidence(result, min_confidence)
    found = [] if low and low_evidence == "drop" else sources(
        result, max_tokens, evidence=evidence, max_passages=max_passages)
    parts = [instructions] if instructions else []
    if not found:
        parts.append(NO_SOURCES)
    else:
        if low:
            parts.append(LOW_EVIDENCE)
        parts.append("Sources:\n" + sources_text(found))
    if question is None:
        question = result.get("text") or ""
    messages = [{"role": "system", "content": "\n\n".join(parts)}, *history,
                {"role": "user", "content": question}]
    return Prompt(messages=messages, sources=found, low_evidence=low)


def prompt_messages(result, question=None, **options) -> List[dict]:
    """`build_prompt(result, question, **options).messages`: the list to send as a
    chat-completions request's `messages`."""
    return build_prompt(result, question, **options).messages


def cited(reply, items) -> List[Source]:
    """The sources a reply cites as `[n]`, in order of first mention (unknown numbers
    are skipped): for showing titles next to a spoken answer."""
    by_number = {s.number: s for s in items}
    seen = []
    for n in re.findall(r"\[(\d+)\]", reply or ""):
        s = by_number.get(int(n))
        if s is not None and s not in seen:
            seen.append(s)
    return seen
