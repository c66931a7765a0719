#!/usr/bin/env python3
"""What protecting the daemon against in-place index writes costs: the read lease
(default: map + populate, copy to memory only when a writer opens the file) against
`--index-in-ram` (always a private copy), on the same index, in the same run.

    python3 tools/soak/update_cost.py --bin target/release --index ss.idx --other demo.idx [--runs 5]

Per mode and run: start-up to serving (the --pid-file appearing; model load included,
the same in both), RSS split into anonymous and file-backed pages once serving, how
long `cp OTHER live.idx` is held in `open` by the lease, and RSS after that copy.
Medians over the runs are printed.
"""
import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rss(pid):
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile"):
            out[k] = int(v.split()[0]) / 1024
    return out


def one(args, work, in_ram):
    live = work / "live.idx"
    shutil.copyfile(args.index, live)
    pid_file = work / "primd.pid"
    pid_file.unlink(missing_ok=True)
    cmd = [str(Path(args.bin) / "primd"), "run", "--model", args.model, "--index", str(live),
           "--pid-file", str(pid_file)] + (["--index-in-ram"] if in_ram else [])
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    while not pid_file.exists():
        if p.poll() is not None:
            raise SystemExit(f"primd exited: {cmd}")
        time.sleep(0.002)
    ready = time.monotonic() - t0
    time.sleep(0.5)
    before = rss(p.pid)
    c0 = time.monotonic()
    shutil.copyfile(args.other, live)  # open(O_TRUNC) waits while the lease is broken
    cp = time.monotonic() - c0
    time.sleep(0.5)
    after = rss(p.pid)
    alive = p.poll() is None
    p.stdin.close()
    rc = p.wait(timeout=60)
    return dict(ready=ready, anon=before["RssAnon"], file=before["RssFile"], cp=cp,
                anon_after=after["RssAnon"], alive=alive and rc == 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release"))
    ap.add_argument("--model", default=str(ROOT / "models"))
    ap.add_argument("--index", required=True)
    ap.add_argument("--other", required=True, help="an index copied over the live one in place")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    size = Path(args.index).stat().st_size / 2**20
    print(f"index {args.index}: {size:.1f} MiB; {args.runs} runs per mode, interleaved; medians")
    work = Path(tempfile.mkdtemp(prefix="primd-update-cost-"))
    res = {False: [], True: []}
    for _ in range(args.runs):
        for mode in (False, True):
            res[mode].append(one(args, work, mode))
    print("| mode | start to serving s | RssAnon MiB | RssFile MiB | cp (held in open by a lease) ms "
          "| RssAnon after cp MiB | survived |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for mode, name in ((False, "map + lease (default)"), (True, "--index-in-ram")):
        r = res[mode]
        m = lambda k: statistics.median(x[k] for x in r)
        print(f"| {name} | {m('ready'):.3f} | {m('anon'):.1f} | {m('file'):.1f} | "
              f"{m('cp') * 1e3:.2f} | {m('anon_after'):.1f} | "
              f"{sum(x['alive'] for x in r)}/{len(r)} |")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
