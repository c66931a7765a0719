#!/usr/bin/env python3
"""primd's embedders (tract fp32, primd int8) against onnxruntime, one run.

Runs `cargo bench --bench embed` (criterion: tract fp32 on models/model.onnx, primd
int8 on models/model-int8.onnx), then onnxruntime in this process on the same texts
(5, 10, 20, 30 tokens, cut from benches/data/bench_text.txt exactly as the criterion
bench cuts them), single thread, tokenisation and pooling included on all sides:
onnxruntime fp32 on model.onnx, and onnxruntime dynamic int8 (`quantize_dynamic` of
the same model.onnx, per-channel weights; u8 and s8 weights, both are printed with
their cosine to the sentence-transformers references of tests/data). Also measures
model load time and peak RSS after load + one embed for `primd embed` (fp32 and
--int8) and for onnxruntime, each in a fresh process. Prints the Markdown tables
quoted in the README.

    python3 -m venv /tmp/bench && /tmp/bench/bin/pip install -r tools/bench/requirements.txt
    /tmp/bench/bin/python tools/bench/embed.py [--skip-cargo] [--measure]
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


ORT_MODELS = {
    "fp32": "model.onnx",
    "int8-u8": "ort-int8-u8.onnx",  # quantize_dynamic, per-channel u8 weights
    "int8-s8": "ort-int8-s8.onnx",  # quantize_dynamic, per-channel s8 weights
}


def ort_model_path(kind):
    """The onnxruntime model for `kind`; the int8 ones are made once from model.onnx
    with onnxruntime's own `quantize_dynamic` and kept under the cargo target dir."""
    if kind == "fp32":
        return os.path.join(MODEL_DIR, "model.onnx")
    path = os.path.join(TARGET, ORT_MODELS[kind])
    if not os.path.exists(path):
        from onnxruntime.quantization import QuantType, quantize_dynamic

        weight_type = QuantType.QUInt8 if kind == "int8-u8" else QuantType.QInt8
        os.makedirs(TARGET, exist_ok=True)
        tmp = path + ".tmp.onnx"
        quantize_dynamic(os.path.join(MODEL_DIR, "model.onnx"), tmp,
                         per_channel=True, weight_type=weight_type)
        os.replace(tmp, path)
    return path


def ort_session(threads=1, kind="fp32"):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(ort_model_path(kind), so, providers=["CPUExecutionProvider"])


def ort_embed(sess, tok, text):
    import numpy as np

    ids = np.array([tok.encode(text).ids], dtype=np.int64)
    h = sess.run(None, {"input_ids": ids})[0][0]
    v = h.mean(axis=0)
    return v / max(float(np.linalg.norm(v)), 1e-12)


def ort_quality(kind):
    """Mean and min cosine to tests/data/reference.jsonl (sentence-transformers)."""
    import numpy as np

    tok, sess = tokenizer(), ort_session(kind=kind)
    cos = []
    with open(os.path.join(ROOT, "tests/data/reference.jsonl")) as f:
        for line in f:
            ref = json.loads(line)
            v = ort_embed(sess, tok, ref["text"])
            cos.append(float(np.dot(v, np.array(ref["embedding"], dtype=np.float32))))
    return statistics.mean(cos), min(cos)


def bench_ort(texts, seconds=4.0, kind="fp32"):
    tok, sess = tokenizer(), ort_session(kind=kind)
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


def peak_rss_primd(int8, primd):
    """Load time (from primd's log) and peak RSS of `primd embed` after load + one embed."""
    env = dict(os.environ, RUST_LOG="primd=info")
    # GNU time reports the peak RSS of exactly this child (getrusage(RUSAGE_CHILDREN)
    # would report the largest child so far, e.g. rustc).
    cmd = ["/usr/bin/time", "-f", "maxrss_kib %M", primd, "embed", "--model", MODEL_DIR]
    p = subprocess.run(cmd + (["--int8"] if int8 else ["--fp32"]) + ["hello world"],
                       capture_output=True, text=True, env=env, check=True)
    rss = next(int(l.split()[1]) for l in p.stderr.splitlines()
               if l.startswith("maxrss_kib")) / 1024
    load_ms = next(float(l.split("loaded in ")[1].split(" ms")[0])
                   for l in p.stderr.splitlines() if "loaded in " in l)
    return load_ms, rss


def peak_rss_ort(kind):
    """Load time and peak RSS (after load + one embed) of onnxruntime, fresh process."""
    code = ("import time,resource,sys; sys.path.insert(0, %r); import embed as b; "
            "b.ort_model_path(%r); t=time.perf_counter(); s=b.ort_session(kind=%r); "
            "tok=b.tokenizer(); l=(time.perf_counter()-t)*1e3; "
            "b.ort_embed(s, tok, 'hello world'); "
            "print(l, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024)")
    out = subprocess.run([sys.executable, "-c", code % (os.path.dirname(__file__), kind, kind)],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-cargo", action="store_true",
                    help="reuse the last criterion results instead of running cargo bench")
    profile = ap.add_mutually_exclusive_group()
    profile.add_argument("--dev-opt3", action="store_true",
                         help="build the bench and primd in the dev profile with primd at "
                         "opt-level 3 (deps are opt-level 3 there already): minutes instead of "
                         "a cold bench-profile build of tract; no LTO, so slightly slower")
    profile.add_argument("--measure", action="store_true",
                         help="build the bench and primd in the `measure` profile (Cargo.toml): "
                         "the shipped code's speed without fat LTO, what docs/benchmarks.md "
                         "measures (since 2026-12-04)")
    args = ap.parse_args()
    cargo_profile = ["--profile", "bench"]
    primd_bin = os.path.join(TARGET, "release", "primd")
    if args.measure:
        cargo_profile = ["--profile", "measure"]
        primd_bin = os.path.join(TARGET, "measure", "primd")
    elif args.dev_opt3:
        cargo_profile = ["--profile", "dev"] + [
            a for kv in ("opt-level=3", "debug-assertions=false", "overflow-checks=false")
            for a in ("--config", f"profile.dev.package.primd.{kv}")]
        primd_bin = os.path.join(TARGET, "debug", "primd")
    for kind in ORT_MODELS:
        ort_model_path(kind)  # quantize before anything is timed
    if not args.skip_cargo:
        # `cargo bench` alone uses the bench profile.
        bench_profile = cargo_profile if args.dev_opt3 or args.measure else []
        subprocess.run(["cargo", "bench"] + bench_profile + ["--bench", "embed"], cwd=ROOT,
                       check=True)
        # The bench profile (release, thin LTO) writes target/release/primd too.
        subprocess.run(["cargo", "build"] + cargo_profile + ["--bin", "primd"], cwd=ROOT,
                       check=True)
    texts = texts_by_length(tokenizer())
    ort = {kind: bench_ort(texts, kind=kind) for kind in ORT_MODELS}

    def med(bench, n):
        return criterion_median_ms("embed", bench, n)

    print("\nPer-embed latency, one thread, median ms (onnxruntime: min in brackets)\n")
    print("| tokens | tract fp32 | primd int8 | ort fp32 | ort int8 u8 | ort int8 s8 "
          "| primd int8 / tract fp32 | primd int8 / best ort int8 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in LENGTHS:
        t, q = med("tract-fp32-1t", n), med("primd-int8-1t", n)
        o = {k: ort[k][n] for k in ORT_MODELS}
        best = min(o["int8-u8"][0], o["int8-s8"][0])
        print(f"| {n} | {t:.2f} | {q:.2f} | "
              + " | ".join(f"{o[k][0]:.2f} ({o[k][1]:.2f})" for k in ORT_MODELS)
              + f" | {q / t:.2f}x | {q / best:.2f}x |")
    for name, n in (("tract-fp32", 20), ("primd-int8", 20), ("primd-int8", 5)):
        t2 = med(f"{name}-2t", n)
        print(f"\n{name} with 2 threads at {n} tokens: {t2:.2f} ms "
              f"({med(f'{name}-1t', n) / t2:.2f}x the 1-thread speed)")
    print("\nonnxruntime quality, cosine to sentence-transformers (mean / min):")
    for kind in ORT_MODELS:
        mean, low = ort_quality(kind)
        print(f"  {kind}: {mean:.5f} / {low:.5f}")
    print("\n| engine | load + optimise, ms | peak RSS after load + one embed, MiB "
          "| model file, MB |")
    print("| --- | --- | --- | --- |")
    for int8, name, file in ((False, "primd fp32", "model.onnx"),
                             (True, "primd int8", "model-int8.onnx")):
        load_ms, rss = peak_rss_primd(int8, primd_bin)
        size = os.path.getsize(os.path.join(MODEL_DIR, file)) / 1e6
        print(f"| {name} | {load_ms:.0f} | {rss:.0f} | {size:.1f} |")
    for kind in ORT_MODELS:
        load_ms, rss = peak_rss_ort(kind)
        size = os.path.getsize(ort_model_path(kind)) / 1e6
        print(f"| onnxruntime {kind} (incl. Python) | {load_ms:.0f} | {rss:.0f} | {size:.1f} |")

if __name__ == "__main__":
    main()
