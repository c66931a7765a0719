"""The data layout every benchmark and evaluation script takes (docs/benchmarks.md).

`--data DIR` names a folder with `corpus.jsonl`, `queries.jsonl`, `qrels.tsv` and,
optionally, `streams.jsonl` (recorded recognizer output); `--corpus`, `--queries`,
`--qrels` and `--streams` name one file each and win over the folder. So the same
command runs on this project's dev set or on any other corpus laid out alike.
"""

import json
import os
import re
import unicodedata

FILES = {
    "corpus": "corpus.jsonl",
    "queries": "queries.jsonl",
    "qrels": "qrels.tsv",
    "streams": "streams.jsonl",
}


def add_arguments(ap, files):
    """Adds `--data` and one flag per name in `files`."""
    ap.add_argument("--data", metavar="DIR",
                    help="data folder: " + ", ".join(FILES[f] for f in files))
    for f in files:
        names = [f"--{f}"] + (["--stt"] if f == "streams" else [])
        ap.add_argument(*names, dest=f, metavar="FILE",
                        help=f"{FILES[f]} (default: the one in --data)")


def resolve(ap, args, required, optional=()):
    """Fills each file from `--data` when it was not named; a required one that is
    neither named nor in the folder is an error naming both flags."""
    for f in (*required, *optional):
        if getattr(args, f) is None and args.data:
            path = os.path.join(args.data, FILES[f])
            if f in required or os.path.exists(path):
                setattr(args, f, path)
        if f in required and getattr(args, f) is None:
            ap.error(f"--{f} FILE or --data DIR is required")
        if getattr(args, f) is not None and not os.path.exists(getattr(args, f)):
            ap.error(f"{getattr(args, f)}: no such file")


def records(path):
    """The JSON objects of a JSON-lines file, blank lines skipped; a BEIR line's `_id`
    is read as `id` (as primd's own readers do)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if "id" not in r and "_id" in r:
                    r["id"] = r["_id"]
                yield r


def windows(n, chunk_words, overlap):
    """(start, end) word ranges of a document of `n` words, cut as build-index cuts it
    (tools/build-index/src/corpus.rs): whole when it fits in `chunk_words` (or that is
    0), else windows of `chunk_words` words sharing `overlap`."""
    if chunk_words == 0 or n <= chunk_words:
        return [(0, n)]
    out, start = [], 0
    while True:
        end = min(start + chunk_words, n)
        out.append((start, end))
        if end == n:
            return out
        start += chunk_words - overlap


# Rust's char::is_whitespace (Unicode White_Space); Python's str.isspace also counts
# U+001C..U+001F, which Rust does not.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_SPANS = re.compile(f"[^{RUST_WHITESPACE}]+")


def word_spans(text):
    """Character ranges of whitespace-separated words (corpus.rs word_spans)."""
    return [m.span() for m in _SPANS.finditer(text)]


def chunk(docs, chunk_words=180, overlap=20):
    """Passages as build-index cuts them (tools/build-index/src/corpus.rs): (doc id, chunk
    no, title, text) for each window of each document; `chunk_words` 0 keeps documents
    whole. The one chunker of the evaluation and benchmark scripts."""
    out = []
    for d in docs:
        text = d["text"]
        spans = word_spans(text)
        n = len(spans)
        for k, (s, e) in enumerate(windows(n, chunk_words, overlap)):
            body = "" if n == 0 else text[spans[s][0]:spans[e - 1][1]]
            out.append((str(d["id"]), k, d.get("title") or "", body))
    return out


def passage_text(title, text):
    """What is indexed for a passage (src/index/mod.rs passage_embed_text)."""
    return f"{title}\n{text}" if title else text


# Letters without a canonical decomposition, and their usual spellings (src/words.rs).
_FOLD_SPECIAL = {"ß": "ss", "ẞ": "ss", "æ": "ae", "Æ": "ae", "œ": "oe", "Œ": "oe", "þ": "th",
                 "Þ": "th", "ø": "o", "Ø": "o", "ł": "l", "Ł": "l", "đ": "d", "Đ": "d",
                 "ð": "d", "Ð": "d", "ı": "i"}


def _latin(c):
    o = ord(c)
    return 0xC0 <= o <= 0x24F or 0x1E00 <= o <= 0x1EFF


def fold(text):
    """primd's word rules version 2 before the word split (src/words.rs): Latin
    letters with diacritics folded to their base letters, a combining mark after a Latin
    letter dropped, typographic apostrophes read as "'". Other scripts are left alone."""
    out = []
    for c in text:
        if c in "\u2019\u2018\u02bc":
            out.append("'")
        elif c in _FOLD_SPECIAL:
            out.append(_FOLD_SPECIAL[c])
        elif _latin(c):
            out.append("".join(d for d in unicodedata.normalize("NFD", c)
                               if not unicodedata.category(d).startswith("M")))
        elif (unicodedata.category(c).startswith("M") and out and out[-1]
              and (out[-1][-1].isascii() or _latin(out[-1][-1]))):
            continue
        else:
            out.append(c)
    return "".join(out)


def lower_words(text):
    """primd's word split (src/words.rs lower_words, version 2): lower-cased words of
    alphanumerics and apostrophes inside a word, after `fold`; everything else splits.
    The one normaliser of the evaluation scripts."""
    words, cur, in_word = [], [], False
    for c in fold(text):
        if c.isalnum() or (c == "'" and in_word):
            in_word = True
            cur.append(c.lower())
        else:
            if cur:
                words.append("".join(cur))
                cur = []
            in_word = False
    if cur:
        words.append("".join(cur))
    return words
