#!/usr/bin/env python3
"""Search quality of an index on a question set with qrels, per retriever.

Runs `primd search` on every query once per row and reports hit@1, hit@10, MRR@10 (a
query is a hit at rank r when the r-th result is a chunk of a relevant document), and,
when the exact dense search ran, the top-10 overlap with it (passages, i.e. (id, chunk)
pairs). Rows:
- `--retriever dense,lexical,hybrid`: one row each, at the defaults (hybrid: the
  default fusion rule and weight);
- `--weights 0,0.1,...,1`: hybrid with the convex fusion at each lexical weight (the
  curve weight vs hit@1/hit@10);
- `--fusion rrf` (or `convex,rrf`): hybrid with each fusion rule at its default weight;
- `--exact` and `--candidates 10,50,...`: the dense exact reference and binary top-C +
  rerank (the 1-bit scan study).
Standard library only.

    python3 tools/eval/search_quality.py --index ss.idx \
        --queries ../shared/data/spoken-squad/queries.jsonl \
        --qrels ../shared/data/spoken-squad/qrels.tsv \
        --retriever dense,lexical,hybrid [--weights 0,0.1,0.2,...,1] [--fusion rrf]
"""

import argparse
import json
import os
import subprocess
import time

import dataset
from qrels import load_qrels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_search(primd, model, index, queries_path, extra):
    with open(queries_path, "rb") as stdin:
        t0 = time.time()
        out = subprocess.run([primd, "search", "--model", model, "--index", index,
                              "--k", "10", *extra], stdin=stdin, capture_output=True,
                             check=True).stdout
        secs = time.time() - t0
    results = {}
    search_ms = []
    for line in out.decode().splitlines():
        r = json.loads(line)
        results[str(r["id"])] = [(h["id"], h["chunk"]) for h in r["results"]]
        ms = r["ms"]
        search_ms.append(ms.get("lexical", 0.0) + ms["scan"] + ms["rerank"])
    return results, secs, search_ms


def metrics(results, qrels):
    """hit@1, hit@10, MRR@10 over the queries that have a relevant document (as
    `primd eval` and trec_eval count: a query nobody judged is not a miss)."""
    hit1 = hit10 = mrr = 0.0
    judged = {qid: hits for qid, hits in results.items() if qrels.get(qid)}
    for qid, hits in judged.items():
        rel = qrels[qid]
        rank = next((i + 1 for i, (doc, _) in enumerate(hits[:10]) if doc in rel), None)
        if rank:
            hit10 += 1
            hit1 += rank == 1
            mrr += 1.0 / rank
    n = max(1, len(judged))
    return hit1 / n, hit10 / n, mrr / n


def csv(s):
    return [x.strip() for x in s.split(",") if x.strip()] if s else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    dataset.add_arguments(ap, ["queries", "qrels"])
    ap.add_argument("--model", default=os.path.join(ROOT, "models"))
    ap.add_argument("--primd", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "primd"))
    ap.add_argument("--retriever", default="",
                    help="comma-separated retrievers, one row each (dense,lexical,hybrid)")
    ap.add_argument("--weights", default="",
                    help="hybrid convex fusion at each lexical weight, e.g. 0,0.1,...,1")
    ap.add_argument("--fusion", default="", help="hybrid rows per fusion rule: convex,rrf")
    ap.add_argument("--candidates", default=None,
                    help="dense binary top-C + rerank rows (default 10,50,100,200 when no "
                    "--retriever/--weights/--fusion is given)")
    ap.add_argument("--exact", action="store_true",
                    help="the dense exact row (always run with --candidates)")
    ap.add_argument("--extra", default="", help="extra flags for every primd search")
    ap.add_argument("--int8", action="store_true",
                    help="force the int8 embedder (the index decides by default)")
    args = ap.parse_args()
    dataset.resolve(ap, args, ["queries", "qrels"])
    common = (["--int8"] if args.int8 else []) + args.extra.split()

    hybrid_rows = args.retriever or args.weights or args.fusion
    candidates = csv(args.candidates if args.candidates is not None
                     else ("" if hybrid_rows else "10,50,100,200"))
    qrels = load_qrels(args.qrels)

    rows = []  # (name, results, secs, latencies)

    def row(name, extra):
        res, secs, lat = run_search(args.primd, args.model, args.index, args.queries,
                                    [*extra, *common])
        rows.append((name, res, secs, lat))
        h1, h10, mrr = metrics(res, qrels)
        print(f"  {name}: hit@1 {h1:.3f} hit@10 {h10:.3f} MRR@10 {mrr:.3f} ({secs:.0f} s)",
              flush=True)
        return res

    exact = None
    if args.exact or candidates:
        exact = row("dense exact (int8 brute force)", ["--exact", "--retriever", "dense"])
    for c in candidates:
        row(f"dense binary top-{c} + rerank", ["--retriever", "dense", "--candidates", c])
    for r in csv(args.retriever):
        row(r, ["--retriever", r])
    for w in csv(args.weights):
        row(f"hybrid convex, lexical_weight {w}",
            ["--retriever", "hybrid", "--fusion", "convex", "--lexical-weight", w])
    for f in csv(args.fusion):
        row(f"hybrid {f}", ["--retriever", "hybrid", "--fusion", f])

    n = len(rows[0][1]) if rows else 0
    judged = sum(1 for qid in rows[0][1] if qrels.get(qid)) if rows else 0
    unjudged = f" ({n - judged} without a relevant document, not counted)" if judged < n else ""
    print(f"\n{judged} queries{unjudged}, index {os.path.basename(args.index)}\n")
    print("| search | hit@1 | hit@10 | MRR@10 | top-10 overlap with dense exact | "
          "search ms (median, after embed) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, res, secs, lat in rows:
        h1, h10, mrr = metrics(res, qrels)
        overlap = "–"
        if exact:
            overlap = "%.3f" % (sum(len(set(res[q][:10]) & set(exact[q][:10]))
                                    / max(1, len(exact[q][:10])) for q in exact) / len(exact))
        lat.sort()
        print(f"| {name} | {h1:.3f} | {h10:.3f} | {mrr:.3f} | {overlap} | "
              f"{lat[len(lat) // 2]:.3f} |")


if __name__ == "__main__":
    main()
