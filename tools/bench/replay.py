#!/usr/bin/env python3
"""Replay benchmark: real recognizer partials through `primd run`, streaming vs baseline.

Feeds the 150 recorded Moonshine utterances of ../shared/data/stt (rendered to primd's
jsonl dialect by tools/replay/stt_replay.py) through the real daemon, paced at their
audio timestamps (`--pace`, default 6x real time), once with streaming and once with
`--no-streaming` (wait for the final, then search). Reports, for each: hit@1 and hit@10
of the final results against the Spoken-SQuAD qrels, the share of utterances per path,
and end-of-utterance → results latency (p50, p90, p99). Standard library only.

    python3 tools/bench/replay.py --index ss.idx [--pace 6] [--extra "--trigger-interval 2"]
        [--retriever dense,lexical,hybrid] [--revision-weight 0,0.25,1]

With --retriever, one baseline and one streaming row per retriever (default: the
index's default, hybrid for an index with a lexical section); with --revision-weight,
one streaming row per weight of the words only earlier partials had.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "eval"))
import dataset  # noqa: E402
from qrels import load_qrels  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run(primd, model, index, stream, pace, extra):
    cmd = [primd, "run", "--model", model, "--index", index, "--input", stream,
           "--pace", str(pace), "--endpoint-ms", "5000", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [json.loads(l) for l in out.splitlines() if json.loads(l).get("type") == "final"]


def summarize(name, finals, ids, qrels):
    assert len(finals) == len(ids), (len(finals), len(ids))
    hit1 = hit10 = judged = 0
    paths = {}
    for f, qid in zip(finals, ids):
        paths[f["path"]] = paths.get(f["path"], 0) + 1
        rel = qrels.get(qid)
        if not rel:
            continue  # nobody judged it: not a miss (as `primd eval` counts)
        judged += 1
        docs = [r["id"] for r in f["results"][:10]]
        hit1 += bool(docs) and docs[0] in rel
        hit10 += any(d in rel for d in docs)
    lat = [f["ms"]["eou_to_result"] for f in finals]
    n = len(finals)
    share = ", ".join(f"{k} {v / n:.0%}" for k, v in sorted(paths.items()))
    spec = sum(f["counts"]["speculative_searches"] for f in finals) / n
    j = max(judged, 1)
    print(f"| {name} | {hit1 / j:.3f} | {hit10 / j:.3f} | {share} | {spec:.1f} | "
          f"{pct(lat, 50):.3f} | {pct(lat, 90):.3f} | {pct(lat, 99):.3f} |")
    return pct(lat, 50), hit10 / j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    ap.add_argument("--model", default=os.path.join(ROOT, "models"))
    ap.add_argument("--primd", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "primd"))
    dataset.add_arguments(ap, ["streams", "qrels"])
    ap.add_argument("--pace", type=float, default=6.0)
    ap.add_argument("--extra", default="", help="extra flags for the streaming run")
    ap.add_argument("--no-baseline", action="store_true", help="only the streaming run")
    ap.add_argument("--retriever", default="", help="comma-separated retrievers, rows for each")
    ap.add_argument("--revision-weight", default="",
                    help="comma-separated revision weights, a streaming row for each")
    ap.add_argument("--final-delay", default="0", help="seconds from end of audio to the final "
                    "(the recordings stamp finals at the end of the audio; a live recognizer "
                    "sends them after its endpointing silence)")
    args = ap.parse_args()
    dataset.resolve(ap, args, ["streams", "qrels"])

    qrels = load_qrels(args.qrels)
    with open(args.streams, encoding="utf-8") as f:
        ids = [json.loads(l)["id"] for l in f if l.strip()]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as stream:
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/replay/stt_replay.py"),
                        "--input", args.streams, "--output", stream.name,
                        "--final-delay", args.final_delay], check=True)
    try:
        judged = sum(1 for i in ids if qrels.get(i))
        unjudged = f" ({len(ids) - judged} without a relevant document: hit rates over {judged})" \
            if judged < len(ids) else ""
        print(f"\n{len(ids)} utterances{unjudged}, pace {args.pace}x real time, final "
              f"{args.final_delay} s after the audio\n")
        print("| mode | hit@1 | hit@10 | paths | speculative searches / utt. | "
              "eou→result p50 ms | p90 | p99 |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        retrievers = [r for r in args.retriever.split(",") if r] or [None]
        weights = [w for w in args.revision_weight.split(",") if w] or [None]
        for r in retrievers:
            rflag = ["--retriever", r] if r else []
            label = f"{r} " if r else ""
            if not args.no_baseline:
                base = run(args.primd, args.model, args.index, stream.name, args.pace,
                           ["--no-streaming", *rflag])
                b50, b10 = summarize(f"{label}baseline (--no-streaming)", base, ids, qrels)
            for w in weights:
                wflag = ["--revision-weight", w] if w else []
                extra = [*rflag, *wflag, *args.extra.split()]
                st = run(args.primd, args.model, args.index, stream.name, args.pace, extra)
                name = f"{label}streaming" + (f" (revision_weight {w})" if w else "") + \
                    (f" ({args.extra})" if args.extra else "")
                s50, s10 = summarize(name, st, ids, qrels)
                if not args.no_baseline:
                    print(f"|   p50 speed-up {b50 / max(s50, 1e-9):.0f}x; "
                          f"hit@10 streaming − baseline = {s10 - b10:+.3f} | | | | | | | |")
    finally:
        os.unlink(stream.name)


if __name__ == "__main__":
    main()
