"""Reading a qrels file (`query-id<TAB>corpus-id<TAB>score`, with a header line)."""


def load_qrels(path):
    """query id -> set of relevant corpus ids (score > 0).

    Reads what `primd eval` reads: blank lines and Windows line ends are skipped, and
    a score may be written as a float ("1.0"); a malformed line stops with its number.
    """
    qrels = {}
    with open(path, encoding="utf-8") as f:
        next(f, None)
        for no, line in enumerate(f, start=2):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            cols = line.split("\t")
            try:
                qid, doc, score = cols
                relevant = float(score) > 0
            except ValueError:
                raise SystemExit(f"{path}:{no}: expected query-id<TAB>corpus-id<TAB>score, got {line!r}")
            if relevant:
                qrels.setdefault(qid, set()).add(doc)
    return qrels
