"""primd's result lines as Python values: `result.context` typed, low evidence judged once.

A final result stays the dict primd sent (docs/protocol.md; `result["results"]` works as
before), but both clients hand it over as a `Result`, whose `context` property parses
the `context` field (docs/context.md) into a `Context` of `Span`s. The parsing is
lenient: a field primd did not send (context off, `context_tokens: 0`) is `None`, a
`best` that points at no span is `None`, so an agent never indexes into an empty list.
The low-evidence policy the adapters and the prompt helper share lives here too, below
both, so neither imports the other.
"""

from dataclasses import dataclass
from typing import Optional, Tuple


@dataclass(frozen=True)
class Span:
    """Where a piece of `context.text` came from: passage `passage` (its `id`), `chunk`,
    and character offsets `start`/`end` in that passage's `text`; `cut` when it ends
    inside a sentence (it alone was longer than the budget left)."""

    passage: str
    chunk: int
    start: int
    end: int
    cut: bool = False
    text: str = ""  # this span's piece of context.text


@dataclass(frozen=True)
class Context:
    """The best sentences of a result's top passages, packed to a token budget.

    `text`: the spans' text (a passage's spans joined by a space, passages by a line
    break); `tokens`: its length in word pieces (primd's embedder's, about 1.05 tokens
    of a GPT-style tokenizer each, docs/context.md); `unit`: `"sentences"`, or
    `"passages"` for an index built before format 6 (whole passages, the last cut);
    `spans`: in the order of `text`; `best`: the index in `spans` of the best-ranked
    sentence, or None when there is none."""

    text: str
    tokens: int
    unit: str
    spans: Tuple[Span, ...]
    best: Optional[int]

    @property
    def best_span(self):
        """The span of the best-ranked sentence (what the Wyoming server speaks), or None."""
        return None if self.best is None else self.spans[self.best]

    def passages(self):
        """The text grouped by passage, in order: a list of `((id, chunk), text)`."""
        groups = []
        for s in self.spans:
            key = (s.passage, s.chunk)
            if groups and groups[-1][0] == key:
                groups[-1] = (key, groups[-1][1] + " " + s.text)
            else:
                groups.append((key, s.text))
        return groups


def _span_texts(text, spans):
    """Each span's piece of `text`: pieces are `end - start` characters, one separator
    (space or line break) between two; None when the lengths do not add up."""
    pieces, at = [], 0
    for s in spans:
        n = s["end"] - s["start"]
        if n < 0 or at + n > len(text) or (at and text[at - 1] not in " \n"):
            return None
        pieces.append(text[at:at + n])
        at += n + 1
    return pieces if at - 1 == len(text) or (not spans and not text) else None


def parse_context(value):
    """The `context` field of a result (a dict) → `Context`, or None if absent or not
    an object. Spans whose text cannot be located keep `text` ""; then
    `Context.passages()` falls back to one group holding the whole text."""
    if not isinstance(value, dict):
        return None
    text = str(value.get("text") or "")
    raw = [s for s in value.get("spans") or [] if isinstance(s, dict)]
    raw = [s for s in raw if isinstance(s.get("start"), int) and isinstance(s.get("end"), int)]
    pieces = _span_texts(text, raw)
    if pieces is None:  # not the documented layout: keep the text whole
        spans = (Span(str(raw[0].get("passage", "")), int(raw[0].get("chunk") or 0),
                      raw[0]["start"], raw[0]["end"], text=text),) if raw and text else ()
    else:
        spans = tuple(Span(str(s.get("passage", "")), int(s.get("chunk") or 0), s["start"],
                           s["end"], bool(s.get("cut", False)), piece)
                      for s, piece in zip(raw, pieces))
    best = value.get("best")
    if isinstance(best, bool) or not isinstance(best, int) or not 0 <= best < len(spans):
        best = None
    return Context(text=text, tokens=int(value.get("tokens") or 0),
                   unit=str(value.get("unit") or "sentences"), spans=spans, best=best)


class Result(dict):
    """A result line as primd sent it (a dict), with typed views of some fields."""

    @property
    def context(self):
        """`Context`, or None: context off, `context_tokens: 0`, a speculative line."""
        return parse_context(self.get("context"))

    @property
    def passages(self):
        """The ranked passages (`results`), best first; [] when none."""
        return list(self.get("results") or [])

    @property
    def low_evidence(self):
        """primd's own verdict: `evidence` is `"low"` (below its threshold)."""
        return is_low_evidence(self)


def titles(result):
    """(passage id, chunk) → title, for the passages of a result."""
    out = {}
    for r in (result or {}).get("results") or []:
        out.setdefault((str(r.get("id", "")), int(r.get("chunk") or 0)),
                       (r.get("title") or "").strip())
    return out


# What an adapter or the prompt helper does with a result primd flagged as low evidence.
LOW_EVIDENCE_POLICIES = ("mark", "drop", "keep")


def check_policy(low_evidence, min_confidence):
    """Validates low-evidence settings (raises ValueError)."""
    if low_evidence not in LOW_EVIDENCE_POLICIES:
        raise ValueError(f"low_evidence={low_evidence!r}: expected one of "
                         f"{', '.join(LOW_EVIDENCE_POLICIES)}")
    if min_confidence is not None and not 0.0 <= float(min_confidence) <= 1.0:
        raise ValueError(f"min_confidence={min_confidence!r}: expected a number in 0..1")


def is_low_evidence(result, min_confidence=None):
    """Whether the top passage of a final result should not be taken as the answer.

    By default primd's own verdict, `evidence` (`"low"` below the daemon's
    `low_evidence_threshold`; a result without the field, from a primd older than it,
    counts as ok). With `min_confidence` (0..1), the caller's threshold instead:
    `confidence` below it, or no confidence (no passage found), is low."""
    result = result or {}
    if min_confidence is None:
        return result.get("evidence", "ok") == "low"
    c = result.get("confidence")
    return c is None or c < min_confidence
