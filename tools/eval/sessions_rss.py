#!/usr/bin/env python3
"""Peak RSS of a `primd run --listen` daemon serving many conversation sessions.

Opens N socket sessions one after another, three turns each (a question and two
follow-ups), keeping at most 64 open (the protocol's cap) by closing the oldest, and
prints the daemon's VmHWM / VmRSS (kB) after 64, 100, 500 and 1,000 sessions.

    python3 tools/eval/sessions_rss.py PRIMD INDEX MODEL_DIR N on|off

`off` runs the daemon with `--no-context`. Standard library only; Linux (/proc).
"""
import json, os, socket, subprocess, sys, time, tempfile
primd, index, model, n, ctx = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
path = os.path.join(tempfile.mkdtemp(), "p.sock")
args = [primd, "run", "--index", index, "--model", model, "--listen", "unix:" + path, "--input", "none"]
if ctx == "off": args.append("--no-context")
d = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, RUST_LOG="error"))
while not os.path.exists(path): time.sleep(0.05)
s = socket.socket(socket.AF_UNIX); s.connect(path); f = s.makefile("r")
def hwm():
    for l in open(f"/proc/{d.pid}/status"):
        if l.startswith(("VmHWM", "VmRSS")): yield l.split()[1]
qs = ["When was the museum built?", "Who designed it?", "And how much is a ticket there?"]
marks = {}
for i in range(n):
    name = f"s{i}"
    for t, q in enumerate(qs):
        s.sendall((json.dumps({"session": name, "turn": t, "final": q}) + "\n").encode())
        while True:
            r = json.loads(f.readline())
            if r.get("type") == "final": break
    # keep up to 64 open (the cap), close the oldest beyond
    if i >= 63:
        s.sendall((json.dumps({"cmd": "close", "session": f"s{i-63}"}) + "\n").encode())
    if i + 1 in (64, 100, 500, 1000):
        marks[i + 1] = list(hwm())
print(ctx, "HWM/RSS kB after N sessions:", marks)
d.terminate(); d.wait()
