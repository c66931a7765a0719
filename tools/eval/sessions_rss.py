#!/usr/bin/env python3
"""Peak RSS of a `primd run --listen` daemon serving many conversation sessions.

Opens N socket sessions one after another, three turns each (a question and two
follow-ups), keeping at most 64 open (the protocol's cap) by closing the oldest, and
prints the daemon's VmHWM / VmRSS (kB) after 64, 100, 500 and 1,000 sessions.

    python3 tools/eval/sessions_rss.py PRIMD INDEX MODEL_DIR N on|off

`off` runs the daemon with `--no-context`. Standard library only; Linux (/proc).
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

TURNS = ["When was the museum built?", "Who designed it?", "And how much is a ticket there?"]
OPEN_AT_MOST = 64
MARKS = (64, 100, 500, 1000)


def memory(pid):
    """(VmHWM, VmRSS) of `pid`, in kB."""
    got = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                got[key] = int(rest.split()[0])
    return got["VmHWM"], got["VmRSS"]


def main():
    if len(sys.argv) != 6 or sys.argv[5] not in ("on", "off"):
        raise SystemExit(__doc__)
    primd, index, model, n, ctx = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    path = os.path.join(tempfile.mkdtemp(), "primd.sock")
    args = [primd, "run", "--index", index, "--model", model, "--listen", "unix:" + path,
            "--input", "none"] + (["--no-context"] if ctx == "off" else [])
    daemon = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, RUST_LOG="error"))
    try:
        while not os.path.exists(path):
            time.sleep(0.05)
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        reader = sock.makefile("r")
        marks = {}
        for i in range(n):
            for turn, text in enumerate(TURNS):
                msg = {"session": f"s{i}", "turn": turn, "final": text}
                sock.sendall((json.dumps(msg) + "\n").encode())
                while json.loads(reader.readline()).get("type") != "final":
                    pass
            if i + 1 >= OPEN_AT_MOST:
                oldest = {"cmd": "close", "session": f"s{i + 1 - OPEN_AT_MOST}"}
                sock.sendall((json.dumps(oldest) + "\n").encode())
            if i + 1 in MARKS:
                marks[i + 1] = memory(daemon.pid)
        print(f"context {ctx}: (VmHWM, VmRSS) kB after N sessions: {marks}")
    finally:
        daemon.terminate()
        daemon.wait()


if __name__ == "__main__":
    main()
