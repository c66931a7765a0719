"""Reading a qrels file (`query-id<TAB>corpus-id<TAB>score`, with a header line)."""


def load_qrels(path):
    """query id -> set of relevant corpus ids (score > 0)."""
    qrels = {}
    with open(path) as f:
        next(f)
        for line in f:
            qid, doc, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, set()).add(doc)
    return qrels
