#!/usr/bin/env python3
"""Search quality of an index on a question set with qrels: exact vs binary + rerank.

Runs `primd search` once with --exact and once per candidate count C, on every query,
and reports hit@1, hit@10, MRR@10 (a query is a hit at rank r when the r-th result is a
chunk of a relevant document) and the top-10 overlap with exact search (passages, i.e.
(id, chunk) pairs). Standard library only.

    python3 tools/eval/search_quality.py --index ss.idx \
        --queries ../shared/data/spoken-squad/queries.jsonl \
        --qrels ../shared/data/spoken-squad/qrels.tsv [--candidates 10,50,100,200]
"""

import argparse
import json
import os
import subprocess
import time

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
    scan_ms = []
    for line in out.decode().splitlines():
        r = json.loads(line)
        results[str(r["id"])] = [(h["id"], h["chunk"]) for h in r["results"]]
        scan_ms.append(r["ms"]["scan"] + r["ms"]["rerank"])
    return results, secs, scan_ms


def metrics(results, qrels):
    hit1 = hit10 = mrr = 0.0
    for qid, hits in results.items():
        rel = qrels.get(qid, set())
        rank = next((i + 1 for i, (doc, _) in enumerate(hits[:10]) if doc in rel), None)
        if rank:
            hit10 += 1
            hit1 += rank == 1
            mrr += 1.0 / rank
    n = len(results)
    return hit1 / n, hit10 / n, mrr / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--qrels", required=True)
    ap.add_argument("--model", default=os.path.join(ROOT, "models"))
    ap.add_argument("--primd", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "primd"))
    ap.add_argument("--candidates", default="10,50,100,200")
    ap.add_argument("--int8", action="store_true",
                    help="the index was built with --int8: search with the int8 embedder")
    args = ap.parse_args()
    precision = ["--int8"] if args.int8 else []

    qrels = load_qrels(args.qrels)

    exact, secs, lat = run_search(args.primd, args.model, args.index, args.queries,
                                   ["--exact", *precision])
    rows = [("exact (int8 brute force)", exact, secs, lat)]
    for c in args.candidates.split(","):
        res, secs, lat = run_search(args.primd, args.model, args.index, args.queries,
                                    ["--candidates", c, *precision])
        rows.append((f"binary top-{c} + rerank", res, secs, lat))

    print(f"\n{len(exact)} queries, index {os.path.basename(args.index)}\n")
    print("| search | hit@1 | hit@10 | MRR@10 | top-10 overlap with exact | hit@10 / exact | scan+rerank ms (median) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    base = metrics(exact, qrels)
    for name, res, secs, lat in rows:
        h1, h10, mrr = metrics(res, qrels)
        overlap = sum(len(set(res[q][:10]) & set(exact[q][:10])) / max(1, len(exact[q][:10]))
                      for q in exact) / len(exact)
        lat.sort()
        print(f"| {name} | {h1:.3f} | {h10:.3f} | {mrr:.3f} | {overlap:.3f} | "
              f"{h10 / base[1]:.3f} | {lat[len(lat) // 2]:.3f} |")


if __name__ == "__main__":
    main()
