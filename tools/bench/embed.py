#!/usr/bin/env python3
"""primd's embedder (tract fp32) against onnxruntime on the same ONNX graph, one run.

Runs `cargo bench --bench embed` (criterion), then onnxruntime in this process on the
same model file and the same texts (5, 10, 20, 30 tokens, cut from
benches/data/bench_text.txt exactly as the criterion bench cuts them), single thread,
tokenisation and pooling included on both sides. Also measures model load time and
peak RSS after load + one embed for `primd embed` and for onnxruntime, each in a fresh
process. Prints the Markdown table quoted in the README.

    python3 -m venv /tmp/bench && /tmp/bench/bin/pip install -r tools/bench/requirements.txt
    /tmp/bench/bin/python tools/bench/embed.py [--skip-cargo]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_DIR = os.environ.get("PRIMD_MODEL_DIR", os.path.join(ROOT, "models"))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
LENGTHS = [5, 10, 20, 30]


def tokenizer():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(MODEL_DIR, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    return tok


def texts_by_length(tok):
    words = open(os.path.join(ROOT, "benches/data/bench_text.txt")).read().split()
    out = {}
    for n in LENGTHS:
        text = ""
        for w in words:
            cand = f"{text} {w}" if text else w
            if len(tok.encode(cand).ids) > n:
                break
            text = cand
        assert len(tok.encode(text).ids) == n, n
        out[n] = text
    return out


def ort_session(threads=1):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(os.path.join(MODEL_DIR, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])


def ort_embed(sess, tok, text):
    import numpy as np

    ids = np.array([tok.encode(text).ids], dtype=np.int64)
    h = sess.run(None, {"input_ids": ids})[0][0]
    v = h.mean(axis=0)
    return v / max(float(np.linalg.norm(v)), 1e-12)


def bench_ort(texts, seconds=4.0):
    tok, sess = tokenizer(), ort_session()
    result = {}
    for n, text in texts.items():
        for _ in range(20):
            ort_embed(sess, tok, text)
        samples, t_end = [], time.perf_counter() + seconds
        while time.perf_counter() < t_end or len(samples) < 60:
            t0 = time.perf_counter()
            ort_embed(sess, tok, text)
            samples.append((time.perf_counter() - t0) * 1e3)
        result[n] = (statistics.median(samples), min(samples))
    return result


def criterion_median_ms(group, bench, n):
    path = os.path.join(TARGET, "criterion", group, bench, str(n), "new", "estimates.json")
    with open(path) as f:
        est = json.load(f)
    return est["median"]["point_estimate"] / 1e6


def child_rss_and_load():
    """Load time and peak RSS (after load + one embed) of primd and of onnxruntime."""
    primd = os.path.join(TARGET, "release", "primd")
    env = dict(os.environ, RUST_LOG="primd=info")
    t0 = time.perf_counter()
    # GNU time reports the peak RSS of exactly this child (getrusage(RUSAGE_CHILDREN)
    # would report the largest child so far, e.g. rustc).
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kib %M", primd, "embed", "--model",
                        MODEL_DIR, "hello world"],
                       capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - t0
    primd_rss = next(int(l.split()[1]) for l in p.stderr.splitlines()
                     if l.startswith("maxrss_kib")) / 1024
    load_ms = next(float(l.split("loaded in ")[1].split(" ms")[0])
                   for l in p.stderr.splitlines() if "loaded in " in l)
    code = ("import time,resource,sys; sys.path.insert(0, %r); import embed as b; "
            "t=time.perf_counter(); s=b.ort_session(); tok=b.tokenizer(); "
            "l=(time.perf_counter()-t)*1e3; b.ort_embed(s, tok, 'hello world'); "
            "print(l, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024)")
    out = subprocess.run([sys.executable, "-c", code % os.path.dirname(__file__)],
                         capture_output=True, text=True, check=True).stdout.split()
    return {"primd": (load_ms, primd_rss, wall * 1e3), "ort": (float(out[0]), float(out[1]))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-cargo", action="store_true",
                    help="reuse the last criterion results instead of running cargo bench")
    args = ap.parse_args()
    if not args.skip_cargo:
        subprocess.run(["cargo", "bench", "--bench", "embed"], cwd=ROOT, check=True)
        # The bench profile (release, thin LTO) writes target/release/primd too.
        subprocess.run(["cargo", "build", "--profile", "bench", "--bin", "primd"], cwd=ROOT,
                       check=True)
    texts = texts_by_length(tokenizer())
    ort = bench_ort(texts)
    print("\n| tokens | tract fp32 (primd), ms | onnxruntime fp32, ms | ratio tract/ort |")
    print("| --- | --- | --- | --- |")
    for n in LENGTHS:
        t = criterion_median_ms("embed", "tract-fp32-1t", n)
        o = ort[n][0]
        print(f"| {n} | {t:.2f} | {o:.2f} (min {ort[n][1]:.2f}) | {t / o:.2f}x |")
    t2 = criterion_median_ms("embed", "tract-fp32-2t", 20)
    print(f"\ntract with 2 threads at 20 tokens: {t2:.2f} ms "
          f"({criterion_median_ms('embed', 'tract-fp32-1t', 20) / t2:.2f}x the 1-thread speed)")
    m = child_rss_and_load()
    print(f"load + optimise: primd {m['primd'][0]:.0f} ms, onnxruntime {m['ort'][0]:.0f} ms")
    print(f"peak RSS after load + one embed: primd {m['primd'][1]:.0f} MiB, "
          f"onnxruntime (incl. Python) {m['ort'][1]:.0f} MiB")


if __name__ == "__main__":
    main()
