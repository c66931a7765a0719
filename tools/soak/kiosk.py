#!/usr/bin/env python3
"""Kiosk soak (issue #15): months of uptime in ten minutes. One `primd run` is fed the
demo's spoken questions (partials and finals, paced at their timestamps) without pause,
while

- the index is replaced every minute, alternately by `primd install-index --pid-file`
  (write beside, fsync, rename, SIGHUP) and by a plain `cp` over the live file followed
  by `kill -HUP` (which only the daemon's read lease survives), switching between two
  corpora whose passage ids are disjoint, so every answer tells which index produced it;
- the stdout consumer stops reading for 5 s every 30 s (the daemon's stdout pipe is
  shrunk to one page, so a pause does fill it);
- the daemon's RSS is sampled every 2 s.

    python3 tools/soak/kiosk.py --bin target/release [--minutes 10]

Checks (exit status 1 if one fails): every final sent was answered or is counted as
dropped in the daemon's log; the daemon is the same process from start to end and exits
0 when its input closes; each swap was logged; answers that started > 3 s after a swap
come from the new index; the RSS median of the last minute is within 10 % (+2 MiB) of
the second minute's. It also reports how long the feeder (the "recognizer") was blocked
writing to primd: with back-pressure that never reaches the recognizer, ~0.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
F_SETPIPE_SZ = 1031


def utterances(stream):
    """[(offset_s, line)] per utterance, offsets relative to its first event."""
    utts, cur = [], []
    for line in Path(stream).read_text().splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue  # the demo stream has deliberate garbage lines
        if not isinstance(ev, dict) or "t" not in ev:
            continue
        cur.append(ev)
        if "final" in ev:
            t0 = cur[0]["t"]
            utts.append([(e["t"] - t0, json.dumps({k: v for k, v in e.items() if k != "t"}))
                         for e in cur])
            cur = []
    return utts


def ids(corpus):
    return {json.loads(l)["id"] for l in Path(corpus).read_text().splitlines() if l.strip()}


def rss_kib(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release"), help="dir with primd and build-index")
    ap.add_argument("--model", default=str(ROOT / "models"))
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--swap-every", type=float, default=60)
    ap.add_argument("--pause-every", type=float, default=30)
    ap.add_argument("--pause", type=float, default=5)
    ap.add_argument("--pace", type=float, default=2.0, help="speech speed-up of the stream")
    ap.add_argument("--gap", type=float, default=0.5, help="silence between questions, s")
    ap.add_argument("--corpus-a", default=str(ROOT / "demo/corpus.jsonl"))
    ap.add_argument("--corpus-b", default=str(ROOT / "tests/data/eval/corpus.jsonl"))
    ap.add_argument("--stream", default=str(ROOT / "demo/stream.jsonl"))
    ap.add_argument("--keep", help="keep the work files (log, answers) in this directory")
    args = ap.parse_args()

    primd, build = Path(args.bin) / "primd", Path(args.bin) / "build-index"
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="primd-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    # Passage ids only one corpus has tell which index answered.
    ids_a, ids_b = ids(args.corpus_a), ids(args.corpus_b)
    only = {"A": ids_a - ids_b, "B": ids_b - ids_a}
    idx = {}
    for name, corpus in (("A", args.corpus_a), ("B", args.corpus_b)):
        idx[name] = work / f"{name}.idx"
        subprocess.run([build, "--model", args.model, "--input", corpus, "--output", idx[name]],
                       check=True, stderr=subprocess.DEVNULL)
    live, pid_file = work / "live.idx", work / "primd.pid"
    shutil.copyfile(idx["A"], live)
    log_path = work / "primd.log"
    log = open(log_path, "w")
    env = dict(os.environ, RUST_LOG="primd=info")
    p = subprocess.Popen([primd, "run", "--model", args.model, "--index", live, "--dialect", "jsonl",
                          "--emit-speculative", "--pid-file", pid_file],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
    try:
        import fcntl
        fcntl.fcntl(p.stdout.fileno(), F_SETPIPE_SZ, 4096)
    except OSError as e:
        print(f"(could not shrink the stdout pipe: {e})", file=sys.stderr)
    while not pid_file.exists():
        if p.poll() is not None:
            sys.exit(f"primd exited at start ({p.returncode}); see {log_path}")
        time.sleep(0.05)
    pid = p.pid
    start = time.monotonic()
    end = start + args.minutes * 60

    # Consumer: reads answers, stops for `pause` s every `pause_every` s.
    answers, spec_count = [], [0]

    def consume():
        next_pause = start + args.pause_every
        for raw in p.stdout:
            now = time.monotonic()
            if now >= next_pause and now < end:
                time.sleep(args.pause)
                next_pause += args.pause_every
            v = json.loads(raw)
            if v.get("type") == "final":
                top = v["results"][0]["id"] if v.get("results") else None
                answers.append((time.monotonic(), v["utterance"], top))
            else:
                spec_count[0] += 1

    cons = threading.Thread(target=consume, daemon=True)
    cons.start()

    # RSS sampler.
    rss = []

    def sample():
        while p.poll() is None:
            r = rss_kib(pid)
            if r:
                rss.append((time.monotonic() - start, r))
            time.sleep(2)

    threading.Thread(target=sample, daemon=True).start()

    # Swapper: alternately install-index and cp + SIGHUP, A <-> B.
    swaps = []  # (time, corpus, method)

    def swapper():
        k = 0
        while True:
            t = start + (k + 1) * args.swap_every
            if t >= end - 5:
                return
            time.sleep(max(0, t - time.monotonic()))
            if p.poll() is not None:
                return
            target = "B" if k % 2 == 0 else "A"
            method = "install-index" if k % 4 in (0, 1) else "cp+HUP"
            if method == "install-index":
                subprocess.run([primd, "install-index", idx[target], "--to", live, "--model",
                                args.model, "--pid-file", pid_file],
                               check=True, stderr=subprocess.DEVNULL)
            else:
                shutil.copyfile(idx[target], live)  # in place: the lease must save us
                os.kill(pid, signal.SIGHUP)
            swaps.append((time.monotonic(), target, method))
            k += 1

    sw = threading.Thread(target=swapper, daemon=True)
    sw.start()

    # Feeder ("recognizer"): questions back to back, paced; measures its own blocking.
    utts = utterances(args.stream)
    sent, blocked, worst = [], 0.0, 0.0
    i = 0
    while time.monotonic() < end and p.poll() is None:
        u = utts[i % len(utts)]
        t0 = time.monotonic()
        sent.append(t0)
        for off, line in u:
            due = t0 + off / args.pace
            time.sleep(max(0, due - time.monotonic()))
            w0 = time.monotonic()
            try:
                p.stdin.write(line.encode() + b"\n")
                p.stdin.flush()
            except BrokenPipeError:
                break
            dt = time.monotonic() - w0
            blocked += dt
            worst = max(worst, dt)
        time.sleep(args.gap)
        i += 1
    sw.join()
    p.stdin.close()
    try:
        rc = p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = "hung at end"
    cons.join(timeout=30)
    log.close()
    text = log_path.read_text()

    # Report.
    fails = []
    dropped = sum(int(m) for m in re.findall(r"(\d+) finals? (?:were )?dropped", text))
    n_sent, n_ans = len(sent), len(answers)
    print(f"ran {args.minutes:g} min: {n_sent} questions sent, {n_ans} answered, "
          f"{dropped} counted as dropped by primd, {spec_count[0]} speculative events")
    if n_ans + dropped != n_sent:
        fails.append(f"{n_sent - n_ans - dropped} questions neither answered nor counted as dropped")
    print(f"same process throughout: pid {pid}, exit status {rc}")
    if rc != 0:
        fails.append(f"exit status {rc}")
    swapped = text.count("index swapped")
    refused = text.count("reload refused")
    copies = text.count("serving a private copy")
    print(f"{len(swaps)} swaps ({sum(m == 'cp+HUP' for _, _, m in swaps)} by cp + SIGHUP), "
          f"{swapped} logged as swapped, {refused} refused, {copies} lease breaks served from memory")
    if swapped != len(swaps):
        fails.append(f"{len(swaps)} swaps but {swapped} logged")
    # Which index answered: by the corpus-only ids.
    wrong, checked = 0, 0
    for (ta, utt, top) in answers:
        cur = "A"
        last_swap = None
        for (ts, target, _) in swaps:
            if ts <= ta:
                cur, last_swap = target, ts
        if top is None or (last_swap is not None and ta - last_swap < 3 + 10):
            continue  # near a swap (or an answer delayed by a pause): either index is right
        if top in only["A"] | only["B"]:
            checked += 1
            if top not in only[cur]:
                wrong += 1
    print(f"answers attributable to one corpus: {checked}, from the wrong index: {wrong}")
    if wrong:
        fails.append(f"{wrong} answers from the index that was not live")
    if rss:
        def med(lo, hi):
            xs = [r for (t, r) in rss if lo <= t < hi]
            return statistics.median(xs) / 1024 if xs else float("nan")
        total = args.minutes * 60
        first, last = med(60, 120), med(total - 60, total)
        print(f"RSS MiB: minute 2 median {first:.1f}, last minute median {last:.1f}, "
              f"max {max(r for _, r in rss) / 1024:.1f}, min {min(r for _, r in rss) / 1024:.1f} "
              f"({len(rss)} samples)")
        if not last <= first * 1.10 + 2:
            fails.append(f"RSS grew: {first:.1f} -> {last:.1f} MiB")
    print(f"feeder blocked writing to primd: {blocked:.2f} s in total, worst single write {worst:.2f} s")
    if fails:
        print("FAIL: " + "; ".join(fails))
        print(f"(log: {log_path})")
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
