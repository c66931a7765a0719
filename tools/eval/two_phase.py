#!/usr/bin/env python3
"""What answering a large lexical query in two phases costs in quality, on the dev set.

primd answers a BM25 query of more postings than it can score exactly in time (a char
n-gram query over 100k+ passages) in two phases (src/lexical/search.rs,
`select_and_rescore`): the query's rarest terms, whose document frequencies add up to
at most a share of the query's postings, choose the top-C candidates; each candidate's
score is then completed with every other term, and the top-k is taken from those exact
scores. Kiosk-sized corpora never take that path, so this script simulates it on the dev
corpus (primd's char 4-grams, across words since analyzer version 3; passages cut as
`build-index` cuts them; the BM25 and metrics of
`lexical_variants.py`), for several shares and C, against the exact query and against
the cheaper rule of simply dropping the commonest terms (no rescoring).

    python3 tools/eval/two_phase.py --data ../shared/data

Needs numpy and scipy. Deterministic.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lexical_variants as lv  # noqa: E402

SHARES = (0.3, 0.2, 0.1, 0.05, 0.03)


def selecting(terms, vocab, df, share):
    """The query's rarest terms (fewest documents first, ties by term id) whose document
    frequencies add up to at most `share` of the query's postings; at least one."""
    counts = {}
    for t in terms:
        j = vocab.get(t)
        if j is not None:
            counts[j] = counts.get(j, 0) + 1
    total = sum(df[j] for j in counts)
    keep, s = set(), 0
    for j in sorted(counts, key=lambda j: (df[j], j)):
        if keep and s + df[j] > share * total:
            break
        keep.add(j)
        s += df[j]
    return [t for t in terms if vocab.get(t) in keep]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="folder with spoken-squad/ and stt/")
    ap.add_argument("--candidates", default="100,300", help="C values (comma-separated)")
    args = ap.parse_args()
    cs = [int(c) for c in args.candidates.split(",")]

    _, passages, qrels, sets = lv.load(args.data, 180, 20)
    pdocs = [p[0] for p in passages]
    pwords = [lv.lower_words(lv.passage_text(p[2], p[3])) for p in passages]
    ((_, fn),) = lv.ANALYZERS[lv.PRIMD_ANALYZER]
    field = lv.Field(lv.analyze(fn, pwords), lv.DEFAULT_K1, lv.DEFAULT_B)
    df = np.diff(field.weights.indptr)
    print(f"{len(passages):,} passages, {lv.PRIMD_ANALYZER}; cells: hit@1 / hit@10 / MRR@10\n")
    header = ["query set", "exact"] + [f"share {s}: drop the rest" for s in SHARES]
    header += [f"share {s}, C {c}: rescore" for s in SHARES for c in cs]
    rows = []
    for name, qs in sets.items():
        qterms = lv.analyze(fn, [lv.lower_words(t) for _, t in qs])
        mask = lv.relevance_mask([q for q, _ in qs], qrels, pdocs)
        full = field.scores(qterms)
        row = [name, lv.fmt(lv.metrics(lv.ranked(full, 10), mask))]
        rescored = []
        for share in SHARES:
            sel = field.scores([selecting(t, field.vocab, df, share) for t in qterms])
            row.append(lv.fmt(lv.metrics(lv.ranked(sel, 10), mask)))
            for c in cs:
                order = np.argsort(-sel, axis=1, kind="stable")[:, :c]
                rows_ = np.arange(full.shape[0])[:, None]
                chosen = np.take_along_axis(sel, order, axis=1) > 0
                complete = np.zeros_like(full)
                complete[rows_, order] = np.where(chosen, full[rows_, order], 0.0)
                rescored.append(lv.fmt(lv.metrics(lv.ranked(complete, 10), mask)))
        rows.append(row + rescored)
    # One row per cell: the table is tall, not wide.
    table = [[h] + [r[i] for r in rows] for i, h in enumerate(header) if i > 0]
    print(lv.md_table(["rule"] + [r[0] for r in rows], table))


if __name__ == "__main__":
    main()
