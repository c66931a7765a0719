#!/usr/bin/env python3
"""Soak test: feed `primd run` a mix of valid streams and garbage at a fixed line rate
for a long time; sample its RSS; count rejected lines by reason and answered utterances.

    python3 tools/soak/soak.py --primd target/release/primd --index index/demo.idx \
        --minutes 10 --rate 1000

Valid traffic is the bundled demo stream (jsonl) with its timestamps stripped, looped;
garbage is: lines that are not JSON, JSON without a transcript, binary noise with
invalid UTF-8, over-long lines (100 KB without a newline), and floods of partials.
Exit status is non-zero if primd dies, answers nothing, or its RSS after warm-up grows
by more than 5 %.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def valid_utterances():
    utts, cur = [], []
    for line in (ROOT / "demo/stream.jsonl").read_text().splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(ev, dict):
            continue
        ev.pop("t", None)
        if "partial" in ev:
            cur.append(json.dumps(ev))
        elif "final" in ev:
            cur.append(json.dumps(ev))
            utts.append(cur)
            cur = []
    return utts


_NOISE = [bytes(random.Random(i).getrandbits(8) for _ in range(200)).replace(b"\n", b" ")
          for i in range(64)]
_LONG = b"x" * 100_000

GARBAGE = {
    "not_json": lambda r: b"this is not json at all " + str(r.random()).encode(),
    "no_transcript": lambda r: b'{"foo": 1, "bar": [1,2,3]}',
    "invalid_utf8": lambda r: b'{"partial": "caf\xe9 \xff\xfe broken"}',
    "binary_noise": lambda r: r.choice(_NOISE),
    "too_long": lambda r: _LONG,
}


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--primd", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--model", default=str(ROOT / "models"))
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--rate", type=int, default=1000, help="lines per second")
    ap.add_argument("--garbage", type=float, default=0.3, help="share of garbage lines")
    ap.add_argument("--sample-every", type=float, default=10.0, help="RSS sample period, s")
    ap.add_argument("--json", help="write the report here as JSON")
    args = ap.parse_args()

    proc = subprocess.Popen(
        [args.primd, "run", "--model", args.model, "--index", args.index,
         "--dialect", "jsonl", "--endpoint-ms", "800"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "RUST_LOG": "primd=warn"},
    )
    answered = Counter()
    stderr_reasons = Counter()

    def read_out():
        for line in proc.stdout:
            try:
                v = json.loads(line)
                answered[v.get("type", "?")] += 1
                if v.get("type") == "final":
                    answered["stale_dropped"] += v["counts"].get("stale_dropped", 0)
            except json.JSONDecodeError:
                answered["bad_output"] += 1

    def read_err():
        for line in proc.stderr:
            s = line.decode("utf-8", "replace")
            if "without a newline" in s:
                stderr_reasons["too_long"] += 1
            elif "not a JSON object" in s:
                stderr_reasons["not_json"] += 1
            elif "needs a" in s:
                stderr_reasons["no_transcript"] += 1
            elif "skipped" in s:
                stderr_reasons["other_skipped"] += 1
            elif "ERROR" in s or "panick" in s:
                stderr_reasons["error"] += 1
                sys.stderr.write(s)

    threading.Thread(target=read_out, daemon=True).start()
    threading.Thread(target=read_err, daemon=True).start()

    rnd = random.Random(7)
    utts = valid_utterances()
    sent = Counter()
    samples = []
    start = time.monotonic()
    end = start + args.minutes * 60
    next_sample = start
    period = 1.0 / args.rate
    batch = max(1, args.rate // 100)
    u, i = rnd.choice(utts), 0
    n = 0
    try:
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_sample:
                samples.append((round(now - start, 1), rss_kib(proc.pid)))
                next_sample += args.sample_every
            chunk = []
            for _ in range(batch):
                if rnd.random() < args.garbage:
                    kind = rnd.choice(list(GARBAGE))
                    chunk.append(GARBAGE[kind](rnd))
                    sent[kind] += 1
                else:
                    chunk.append(u[i].encode())
                    sent["valid"] += 1
                    i += 1
                    if i == len(u):
                        u, i = rnd.choice(utts), 0
                        sent["utterances"] += 1
            proc.stdin.write(b"\n".join(chunk) + b"\n")
            proc.stdin.flush()
            n += batch
            due = start + n * period
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if proc.poll() is not None:
                break
    except BrokenPipeError:
        pass
    alive = proc.poll() is None
    samples.append((round(time.monotonic() - start, 1), rss_kib(proc.pid)))
    try:
        proc.stdin.close()
    except BrokenPipeError:
        pass
    code = proc.wait(timeout=120)
    time.sleep(0.5)

    rss = [r for _, r in samples if r]
    warm = [r for t, r in samples if r and t >= 60] or rss
    growth = (max(warm) - min(warm)) / min(warm) if warm else float("inf")
    elapsed = time.monotonic() - start
    report = {
        "minutes": args.minutes, "rate": args.rate,
        "achieved_rate": round(n / elapsed, 1), "lines_sent": dict(sent),
        "rejected_by_reason": dict(stderr_reasons), "answered": dict(answered),
        "alive_at_end": alive, "exit_code": code,
        "rss_kib": samples, "rss_after_warmup_min_kib": min(warm) if warm else None,
        "rss_after_warmup_max_kib": max(warm) if warm else None,
        "rss_growth_after_warmup": round(growth, 4),
    }
    print(json.dumps({k: v for k, v in report.items() if k != "rss_kib"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    ok = alive and code == 0 and answered["final"] > 0 and growth <= 0.05
    print("soak:", "OK" if ok else "FAILED", file=sys.stderr)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
