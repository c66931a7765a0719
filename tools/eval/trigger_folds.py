#!/usr/bin/env python3
"""Cross-validated learned trigger: thresholds chosen on recorded streams, judged on others.

`primd eval --train-trigger M --trigger-streams T` chooses the learned trigger's
thresholds on the recorded recognizer streams T. Judging it on T itself would flatter it,
so this script splits the streams into K folds (utterance i goes to fold i mod K); for
each fold it trains on the typed questions (the questions of every stream left out),
chooses the thresholds on the other K-1 folds, and compares the fixed and the learned
trigger on the held-out fold (`primd eval --streams FOLD`). It prints per-fold and
pooled figures (means weighted by utterances; latency percentiles over the held-out
utterances of every fold together, from each report's per-utterance latencies).

    python3 tools/eval/trigger_folds.py --primd target/release/primd --index ss.idx \
        --data ../shared/data/spoken-squad \
        --streams ../shared/data/stt/spoken-squad-moonshine.jsonl --folds 5 --out folds/

Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--primd", required=True, help="the primd binary")
    ap.add_argument("--index", required=True)
    ap.add_argument("--data", required=True, help="folder with queries.jsonl and qrels.tsv")
    ap.add_argument("--streams", required=True, help="recorded streams (JSONL)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", required=True, help="folder for the folds' files and reports")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.folds < 2:
        sys.exit("--folds must be at least 2")
    with open(args.streams, encoding="utf-8") as f:
        lines = [l for l in f if l.strip()]
    if len(lines) < args.folds:
        sys.exit(f"{len(lines)} streams cannot make {args.folds} folds")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for k in range(args.folds):
        test = os.path.join(args.out, f"fold{k}-test.jsonl")
        train = os.path.join(args.out, f"fold{k}-calibrate.jsonl")
        with open(test, "w", encoding="utf-8") as t, open(train, "w", encoding="utf-8") as c:
            for i, l in enumerate(lines):
                (t if i % args.folds == k else c).write(l)
        model = os.path.join(args.out, f"fold{k}-trigger.json")
        cmd = [
            args.primd, "eval", "--index", args.index,
            "--queries", os.path.join(args.data, "queries.jsonl"),
            "--qrels", os.path.join(args.data, "qrels.tsv"),
            "--streams", test, "--trigger-streams", train,
            "--train-trigger", model, "--workers", str(args.workers),
            "--json", "--quiet",
        ]
        print(f"fold {k + 1}/{args.folds}: {' '.join(cmd)}", file=sys.stderr)
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        report = json.loads(out)
        with open(os.path.join(args.out, f"fold{k}-report.json"), "w", encoding="utf-8") as f:
            f.write(out)
        cmp = report["retrievers"][0]["trigger"]
        rows.append(cmp)

    def cost(m):
        return m["embeds_per_utterance"] + m["speculative_searches_per_utterance"]

    def embedded(m):
        return m["paths"]["rerank"] + m["paths"]["full"]

    print("| fold | utterances | thresholds | fixed embeds + scans | learned embeds + scans | cost | "
          "hit@10 fixed / learned | finals embedded fixed / learned | p50 ms fixed / learned |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for k, c in enumerate(rows):
        f, l = c["fixed"], c["learned"]
        print(f"| {k + 1} | {f['utterances']} | {c['threshold'][0]:.2f} / {c['threshold'][1]:.2f} | "
              f"{f['embeds_per_utterance']:.2f} + {f['speculative_searches_per_utterance']:.2f} | "
              f"{l['embeds_per_utterance']:.2f} + {l['speculative_searches_per_utterance']:.2f} | "
              f"{cost(l) / cost(f):.3f} | {f['hit10']:.3f} / {l['hit10']:.3f} | "
              f"{embedded(f):.3f} / {embedded(l):.3f} | "
              f"{f['latency_ms']['p50']:.3f} / {l['latency_ms']['p50']:.3f} |")
    n = sum(c["fixed"]["utterances"] for c in rows)

    def pooled(side, key):
        return sum(c[side][key] * c[side]["utterances"] for c in rows) / n

    fe, fs = pooled("fixed", "embeds_per_utterance"), pooled("fixed", "speculative_searches_per_utterance")
    le, ls = pooled("learned", "embeds_per_utterance"), pooled("learned", "speculative_searches_per_utterance")
    print(f"\npooled over {n} held-out utterances: fixed {fe:.2f} + {fs:.2f} = {fe + fs:.2f}, "
          f"learned {le:.2f} + {ls:.2f} = {le + ls:.2f} (cost {(le + ls) / (fe + fs):.3f}); "
          f"hit@1 {pooled('fixed', 'hit1'):.3f} / {pooled('learned', 'hit1'):.3f}, "
          f"hit@10 {pooled('fixed', 'hit10'):.3f} / {pooled('learned', 'hit10'):.3f}; "
          f"relevant lost {sum(c['lost_relevant'] for c in rows)}, "
          f"gained {sum(c['gained_relevant'] for c in rows)}")
    for side in ("fixed", "learned"):
        v = sorted(x for c in rows for x in c[side]["latency_ms"].get("sorted", []))
        if len(v) == n:
            print(f"pooled eou->result, {side}: p50 {percentile(v, 50):.3f} ms, "
                  f"p90 {percentile(v, 90):.3f} ms, finals embedded after end of speech "
                  f"{sum(embedded(c[side]) * c[side]['utterances'] for c in rows) / n:.3f}")


def percentile(sorted_values, p):
    """Linear interpolation between closest ranks, as primd's report computes it."""
    pos = p / 100 * (len(sorted_values) - 1)
    lo, hi = int(pos), min(int(pos) + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


if __name__ == "__main__":
    main()
