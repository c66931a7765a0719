#!/usr/bin/env python3
"""Score recognizer streams (record.py's, or ../shared/data/stt's): word error rate of
the finals against the typed questions, partial cadence, the recognizer's real-time
factor, and, with --index, hybrid hit@1 / hit@10 and eou->result through `primd run`
(tools/bench/replay.py), one row per engine x voice x rate x noise.

    tools/stt/score.py STREAMS.jsonl... [--index IDX --qrels QRELS.tsv | --demo]
        [--primd BIN] [--pace 6]

--demo scores against the demo's expected passages (demo/questions.jsonl: the id of a
recorded demo question is its line number). Standard library only.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def words(text):
    """Lower case, punctuation gone (an apostrophe inside a word stays), hyphens split."""
    text = re.sub(r"[-\u2013\u2014/]", " ", text.lower())
    text = re.sub(r"[^\w\s']", "", text)
    return [w.strip("'") for w in text.split() if w.strip("'")]


def edit_distance(ref, hyp):
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def wer(pairs):
    """Corpus WER: total edits / total reference words."""
    edits = sum(edit_distance(words(ref), words(hyp)) for ref, hyp in pairs)
    return edits / max(1, sum(len(words(ref)) for ref, _ in pairs))


def group_key(r):
    return (r.get("engine", "moonshine (provided)"), r.get("voice", "en-us"), r.get("wpm", 160),
            r.get("snr_db"))


def replay(rows, index, qrels, primd, pace):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    try:
        cmd = [sys.executable, os.path.join(ROOT, "tools", "bench", "replay.py"), "--index", index,
               "--streams", f.name, "--qrels", qrels, "--no-baseline", "--retriever", "hybrid",
               "--pace", str(pace)]
        if primd:
            cmd += ["--primd", primd]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    row = [l for l in out.splitlines() if l.startswith("| hybrid streaming")][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    return float(cells[1]), float(cells[2]), float(cells[5])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("streams", nargs="+")
    ap.add_argument("--index")
    ap.add_argument("--qrels")
    ap.add_argument("--demo", action="store_true", help="qrels from demo/questions.jsonl")
    ap.add_argument("--primd")
    ap.add_argument("--pace", type=float, default=6.0)
    args = ap.parse_args()
    rows = []
    for path in args.streams:
        with open(path) as f:
            rows += [json.loads(l) for l in f if l.strip()]
    qrels = args.qrels
    tmp = None
    if args.demo:
        tmp = tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False)
        tmp.write("query-id\tcorpus-id\tscore\n")
        with open(os.path.join(ROOT, "demo", "questions.jsonl")) as f:
            for n, line in enumerate(f, 1):
                tmp.write(f"{n}\t{json.loads(line)['expected_id']}\t1\n")
        tmp.close()
        qrels = tmp.name
    groups = {}
    for r in rows:
        groups.setdefault(group_key(r), []).append(r)
    head = "| engine | voice | wpm | noise | n | WER (finals) | partials / utt. | partial every (audio s) | RTF |"
    if args.index:
        head += " hit@1 | hit@10 | eou→result p50 ms |"
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for key in sorted(groups, key=lambda k: tuple(str(x) for x in k)):
        g = groups[key]
        engine, voice, wpm, snr = key
        gaps = [b["t"] - a["t"] for r in g for a, b in zip(r["partials"], r["partials"][1:])]
        gaps.sort()
        busy = [r["busy_s"] for r in g if "busy_s" in r]
        rtf = f"{sum(busy) / sum(r['audio_s'] for r in g):.2f}" if busy else "-"
        line = (f"| {engine} | {voice} | {wpm} | {'-' if snr is None else f'{snr:g} dB SNR'} | {len(g)} | "
                f"{wer([(r['text'], r['final']) for r in g]):.1%} | "
                f"{sum(len(r['partials']) for r in g) / len(g):.1f} | "
                f"{gaps[len(gaps) // 2] if gaps else 0:.2f} | {rtf} |")
        if args.index:
            h1, h10, p50 = replay(g, args.index, qrels, args.primd, args.pace)
            line += f" {h1:.3f} | {h10:.3f} | {p50:.3f} |"
        print(line, flush=True)
    if tmp:
        os.unlink(tmp.name)


if __name__ == "__main__":
    main()
