"""The bridge's output, in two of the dialects `primd run` reads (README,
"Recognizers"): `jsonl`, one `{"partial"|"final": text, "t": audio seconds}` object per
line, and `plain`, each line the whole hypothesis so far and an empty line after a
final. Every line is flushed: primd answers as the words arrive."""

import json


def format_event(fmt, kind, t, text):
    """The line(s) for one event, newline-terminated."""
    if fmt == "jsonl":
        return json.dumps({kind: text, "t": round(t, 3)}, ensure_ascii=False) + "\n"
    if fmt == "plain":
        if kind == "partial":
            return text + "\n"
        # An empty final still ends the utterance (the empty line does).
        return (text + "\n" if text else "") + "\n"
    raise ValueError(f"unknown output format {fmt!r} (jsonl or plain)")
