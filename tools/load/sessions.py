#!/usr/bin/env python3
"""Socket load (issue #16): many voice-agent clients on one `primd run --listen`.

Starts one primd daemon (the real model, a Spoken-SQuAD index) listening on a unix
socket, then runs `--clients` clients (default 16) for `--minutes` (default 5), each its
own session, each replaying the recorded recognizer streams (`stt/*.jsonl`: real
Moonshine partials with their audio timestamps) at real time: the partials at their
timestamps, the final at the end of the audio, then the result awaited before a pause
(`--gap`) and the next utterance. Clients start at different utterances so their turns
interleave. All clients share one asyncio loop (primd_client.AsyncClient).

    python3 tools/load/sessions.py [--data /work/shared/data] [--clients 16] [--minutes 5]
        [--index ss.idx] [--primd target/debug/primd] [--json out.json]

Reports, per client and over all: finals sent and answered, eou→result p50/p99/max as
primd measured it (`ms.eou_to_result`, from the final's arrival to the result) and as
the client saw it (final sent → result received, on the client's clock: adds the socket,
JSON and the Python client), speculative lines are not asked for. primd's RSS sampled
every `--rss-every` seconds: flat when the median of the last minute is within 10 %
(+2 MiB) of the second minute's (the soak test's rule). Starvation: the spread of
answered counts and each client's worst latency. Exit status 1 when a final went
unanswered, a client lost its connection, or RSS grew.

The index: `--index`, else /tmp/ss-final.idx when it exists, else built with the
build-index binary next to primd from `--data`'s spoken-squad/corpus.jsonl.
"""

import argparse
import asyncio
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
from primd_client import AsyncClient, PrimdError  # noqa: E402


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def load_streams(paths):
    utts = []
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    u = json.loads(line)
                    utts.append((u["partials"], u["final"], float(u["audio_s"])))
    if not utts:
        sys.exit(f"no utterances in {paths}")
    return utts


class ClientStats:
    def __init__(self, name):
        self.name = name
        self.sent = 0
        self.answered = 0
        self.primd_ms = []
        self.client_ms = []
        self.paths = {}
        self.error = None


async def run_client(i, address, utts, deadline, gap, speed, timeout, stats):
    session = f"load-{i:02d}"
    start = (i * len(utts)) // len(stats)  # clients start at different utterances
    recv = {}

    def on_result(msg):
        if msg.get("type") == "final":
            recv[msg.get("turn")] = time.monotonic()

    st = stats[i]
    try:
        client = await AsyncClient.connect(address, on_result=on_result, timeout=30)
    except PrimdError as e:
        st.error = f"connect: {e}"
        return
    turn = 0
    try:
        k = start
        while time.monotonic() < deadline:
            partials, final, audio_s = utts[k % len(utts)]
            k += 1
            t0 = time.monotonic()
            for p in partials:
                wait = t0 + p["t"] / speed - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if p["text"].strip():
                    await client.partial(session, turn, p["text"])
            wait = t0 + audio_s / speed - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            sent_at = time.monotonic()
            await client.final(session, turn, final)
            st.sent += 1
            try:
                res = await client.wait_final(session, turn, timeout)
            except PrimdError as e:
                st.error = f"turn {turn}: {e}"
                if client.closed:
                    return
            else:
                st.answered += 1
                st.primd_ms.append(float(res["ms"]["eou_to_result"]))
                st.paths[res.get("path")] = st.paths.get(res.get("path"), 0) + 1
                st.client_ms.append((recv.pop(turn, time.monotonic()) - sent_at) * 1000)
            turn += 1
            await asyncio.sleep(gap / speed)
    finally:
        if not client.closed:
            await client.close()


async def sample_rss(pid, every, until, out):
    t0 = time.monotonic()
    while time.monotonic() < until:
        try:
            out.append((time.monotonic() - t0, rss_kib(pid)))
        except OSError:
            return
        await asyncio.sleep(every)


async def main_async(args, address, pid, utts):
    stats = [ClientStats(f"load-{i:02d}") for i in range(args.clients)]
    t_start = time.monotonic()
    deadline = t_start + args.minutes * 60
    rss = []
    rss_task = asyncio.create_task(sample_rss(pid, args.rss_every, deadline + 5, rss))
    await asyncio.gather(*(run_client(i, address, utts, deadline, args.gap, args.speed,
                                      args.timeout, stats) for i in range(args.clients)))
    wall = time.monotonic() - t_start
    try:
        probe = await AsyncClient.connect(address, timeout=10)
        server_stats = await probe.stats()
        await probe.close()
    except PrimdError as e:
        server_stats = {"error": str(e)}
    rss_task.cancel()
    return stats, rss, server_stats, wall


def rss_flat(rss):
    """(second-minute median, last-minute median, flat?) in KiB."""
    if not rss:
        return None, None, False
    end = rss[-1][0]
    second = [v for t, v in rss if 60 <= t < 120] or [v for _, v in rss]
    last = [v for t, v in rss if t >= end - 60]
    a, b = statistics.median(second), statistics.median(last)
    return a, b, b <= a * 1.10 + 2048


def find_index(args):
    if args.index:
        return args.index
    if os.path.exists("/tmp/ss-final.idx"):
        return "/tmp/ss-final.idx"
    corpus = os.path.join(args.data, "spoken-squad", "corpus.jsonl")
    out = os.path.join(tempfile.gettempdir(), "primd-load-ss.idx")
    build = os.path.join(os.path.dirname(args.primd), "build-index")
    print(f"building {out} from {corpus}", file=sys.stderr)
    subprocess.run([build, "--input", corpus, "--output", out], check=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/work/shared/data",
                    help="data folder with stt/*.jsonl (and spoken-squad/corpus.jsonl)")
    ap.add_argument("--streams", nargs="*", help="stream files (default: DATA/stt/*.jsonl)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--gap", type=float, default=1.0, help="pause between a client's turns, s")
    ap.add_argument("--speed", type=float, default=1.0, help="replay speed (1 = real time)")
    ap.add_argument("--timeout", type=float, default=10.0, help="wait for a final's result, s")
    ap.add_argument("--rss-every", type=float, default=5.0)
    ap.add_argument("--index")
    ap.add_argument("--model", default=os.path.join(ROOT, "models"))
    ap.add_argument("--primd", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "primd"))
    ap.add_argument("--extra", default="", help="extra flags for primd run")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()

    streams = args.streams or sorted(glob.glob(os.path.join(args.data, "stt", "*.jsonl")))
    utts = load_streams(streams)
    index = find_index(args)
    tmp = tempfile.mkdtemp(prefix="primd-load-")
    sock = os.path.join(tmp, "primd.sock")
    address = f"unix:{sock}"
    log = open(os.path.join(tmp, "primd.log"), "w")
    cmd = [args.primd, "run", "--listen", address, "--input", "none", "--index", index, "--model", args.model,
           *args.extra.split()]
    print("$ " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log)
    try:
        hello = wait_ready(address, proc)
        print(f"primd {hello.get('primd')} protocol {hello.get('protocol')}, "
              f"{hello.get('passages')} passages; {args.clients} clients x {args.minutes} min, "
              f"{len(utts)} recorded utterances, speed {args.speed}", file=sys.stderr)
        stats, rss, server_stats, wall = asyncio.run(main_async(args, address, proc.pid, utts))
        alive = proc.poll() is None
    finally:
        proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    ok = report(args, stats, rss, server_stats, wall, alive, " ".join(cmd))
    print(f"(primd log: {log.name})", file=sys.stderr)
    sys.exit(0 if ok else 1)


def wait_ready(address, proc):
    """Readiness is the hello line: retry connecting until primd greets (or exits)."""
    async def probe():
        c = await AsyncClient.connect(address, timeout=5)
        hello = c.hello
        await c.close()
        return hello
    t_end = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            sys.exit(f"primd exited with {proc.returncode} before listening")
        try:
            return asyncio.run(probe())
        except PrimdError:
            if time.monotonic() > t_end:
                sys.exit("primd did not greet within 120 s")
            time.sleep(0.2)


def report(args, stats, rss, server_stats, wall, alive, cmd):
    rows = []
    all_p, all_c = [], []
    for s in stats:
        all_p += s.primd_ms
        all_c += s.client_ms
        rows.append({
            "client": s.name, "sent": s.sent, "answered": s.answered,
            "primd_p50": pct(s.primd_ms, 50), "primd_p99": pct(s.primd_ms, 99),
            "client_p50": pct(s.client_ms, 50), "client_p99": pct(s.client_ms, 99),
            "client_max": max(s.client_ms) if s.client_ms else float("nan"),
            "error": s.error,
        })
    sent = sum(s.sent for s in stats)
    answered = sum(s.answered for s in stats)
    a, b, flat = rss_flat(rss)
    counts = [s.answered for s in stats]
    print(f"\n`{cmd}`: {len(stats)} clients, {wall:.0f} s\n")
    print("| client | finals sent | answered | primd eou→result p50 / p99 ms | "
          "client final→result p50 / p99 / max ms |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['client']} | {r['sent']} | {r['answered']} | {r['primd_p50']:.3f} / "
              f"{r['primd_p99']:.3f} | {r['client_p50']:.2f} / {r['client_p99']:.2f} / "
              f"{r['client_max']:.2f} |" + (f" {r['error']}" if r["error"] else ""))
    print(f"| **all** | {sent} | {answered} | {pct(all_p, 50):.3f} / {pct(all_p, 99):.3f} | "
          f"{pct(all_c, 50):.2f} / {pct(all_c, 99):.2f} / {max(all_c) if all_c else float('nan'):.2f} |")
    paths = {}
    for s in stats:
        for k, v in s.paths.items():
            paths[k] = paths.get(k, 0) + v
    print("\npaths: " + ", ".join(f"{k} {v}" for k, v in sorted(paths.items(), key=str)))
    print(f"answered per client: min {min(counts)}, max {max(counts)}; "
          f"worst client max latency {max(r['client_max'] for r in rows):.2f} ms")
    if rss:
        print(f"RSS (KiB, every {args.rss_every:g} s, {len(rss)} samples): start {rss[0][1]}, "
              f"min {min(v for _, v in rss)}, max {max(v for _, v in rss)}, end {rss[-1][1]}; "
              f"median 2nd minute {a:.0f}, last minute {b:.0f} → {'flat' if flat else 'GREW'}")
    keys = ["utterances", "sessions", "clients", "swaps", "stale_turns_ignored",
            "disconnects_overflow"]
    print("primd stats: " + json.dumps({k: server_stats.get(k) for k in keys if k in server_stats}))
    drops = [(c.get("name"), c.get("speculative_dropped"), c.get("finals_dropped"))
             for c in server_stats.get("clients_detail", []) or []]
    if any(d[2] for d in drops):
        print(f"finals dropped by primd: {drops}")
    ok = answered == sent and all(s.error is None for s in stats) and flat and alive
    print(f"every final answered: {answered == sent}; primd alive: {alive}; "
          f"client errors: {sum(s.error is not None for s in stats)} → {'PASS' if ok else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cmd": cmd, "wall_s": wall, "clients": rows, "rss_kib": rss, "paths": paths,
                       "server_stats": server_stats, "ok": ok}, f, indent=1)
    return ok


if __name__ == "__main__":
    main()
