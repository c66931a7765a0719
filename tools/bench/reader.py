#!/usr/bin/env python3
"""primd's reader (int8 cross-encoder on primd's encoder) against onnxruntime, one run.

Runs `cargo bench --bench reader` (criterion: `Reader::score` on pairs of 24, 48 and 96
word pieces, one pair a call and four, one thread), then onnxruntime in this process on
the same file (`models/reader/model.onnx`, already int8: onnxruntime's dynamic
quantization) and the same token ids, one thread, sequential: each pair built as primd
builds it (`[CLS] question [SEP] sentence [SEP]`, token types 0 then 1, the question cut
to 48 pieces and the sentence to 96), the sentences' tokenisation and the batch's
arrays included, as they are in primd's call. The texts are cut from
benches/data/bench_text.txt exactly as the criterion bench cuts them; the script asserts
that its cut matches the bench's (which writes its pairs and logits on request), that
each pair has the tokens it should, that its ids are the tokenizer's own pair encoding,
and prints how far onnxruntime's logits are from primd's. Also measures load time and
peak RSS after load + one pair, each in a fresh process. Prints the Markdown tables of
docs/benchmarks.md.

    python3 -m venv /tmp/bench && /tmp/bench/bin/pip install -r tools/bench/requirements.txt
    /tmp/bench/bin/python tools/bench/reader.py [--skip-cargo] [--measure]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_DIR = os.environ.get("PRIMD_MODEL_DIR", os.path.join(ROOT, "models"))
READER_DIR = os.path.join(MODEL_DIR, "reader")
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
# As benches/reader.rs: (pair tokens, question tokens), [CLS] and [SEP]s included.
SHAPES = [(24, 10), (48, 14), (96, 20)]
BATCHES = [1, 4]
# As src/embed/reader.rs.
MAX_QUESTION_TOKENS = 48
MAX_SENTENCE_TOKENS = 96


def tokenizer():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(READER_DIR, "tokenizer.json"))
    tok.no_padding()  # as shipped: pads to 512
    tok.no_truncation()
    return tok


def question_ids(tok, question):
    """`[CLS] question [SEP]`, cut as `Reader::set_question` cuts it."""
    ids = tok.encode(question).ids
    if len(ids) > MAX_QUESTION_TOKENS + 1:
        ids = ids[:MAX_QUESTION_TOKENS] + [ids[-1]]
    return ids


def pair_ids(tok, qids, sentence):
    """Ids and token types of one pair, as `Reader::score` builds them."""
    ids = tok.encode(sentence).ids
    body = ids[1:-1][:MAX_SENTENCE_TOKENS]
    return qids + body + [ids[-1]], [0] * len(qids) + [1] * (len(body) + 1)


def pair_tokens(tok, qids, sentence):
    """`Reader::pair_tokens`."""
    return len(qids) + min(len(tok.encode(sentence).ids), MAX_SENTENCE_TOKENS + 1) - 1


def cut(start, tokens, count):
    """benches/reader.rs's `cut`: the longest run of the text's words (cycled) from word
    `start` whose `count` is at most `tokens`, which must be exactly `tokens`."""
    words = open(os.path.join(ROOT, "benches/data/bench_text.txt")).read().split()
    text, i = "", start
    while True:
        w = words[i % len(words)]
        cand = f"{text} {w}" if text else w
        if count(cand) > tokens:
            break
        text, i = cand, i + 1
    assert count(text) == tokens, (start, tokens)
    return text


def pairs(tok, pair, q, batch):
    question = cut(0, q, lambda t: len(question_ids(tok, t)))
    qids = question_ids(tok, question)
    sentences = [cut(5 * (2 * k + 1), pair, lambda t: pair_tokens(tok, qids, t))
                 for k in range(batch)]
    return question, sentences


def ort_session():
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(os.path.join(READER_DIR, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])


def ort_inputs(tok, qids, sentences):
    """The batch's arrays, rows padded to the longest with attention_mask 0 (the pairs
    measured here are of one length: no padding)."""
    import numpy as np

    rows = [pair_ids(tok, qids, s) for s in sentences]
    n = max(len(ids) for ids, _ in rows)
    ids = np.zeros((len(rows), n), dtype=np.int64)
    types = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for i, (a, t) in enumerate(rows):
        ids[i, :len(a)], types[i, :len(t)], mask[i, :len(a)] = a, t, 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def ort_score(sess, tok, qids, sentences):
    return sess.run(["logits"], ort_inputs(tok, qids, sentences))[0][:, 0]


def timed(f, seconds=4.0):
    """Median and min ms of `f` over at least `seconds` and 60 calls, after 20."""
    for _ in range(20):
        f()
    samples, t_end = [], time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(samples) < 60:
        t0 = time.perf_counter()
        f()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples), min(samples)


def bench_ort(tok):
    sess, result = ort_session(), {}
    for pair, q in SHAPES:
        for batch in BATCHES:
            question, sentences = pairs(tok, pair, q, batch)
            qids = question_ids(tok, question)
            feeds = ort_inputs(tok, qids, sentences)
            assert feeds["input_ids"].shape == (batch, pair), feeds["input_ids"].shape
            full = timed(lambda: ort_score(sess, tok, qids, sentences))
            alone = timed(lambda: sess.run(["logits"], feeds))
            result[pair, batch] = full, alone
    return result


def check_pairs(tok, bench):
    """The bench's pairs are ours, their ids the tokenizer's own pair encoding, and
    onnxruntime's logits against primd's (max |Δ|)."""
    import numpy as np

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "pairs.json")
        subprocess.run([bench], env=dict(os.environ, PRIMD_READER_PAIRS=path), check=True)
        rows = json.load(open(path))
    sess, worst = ort_session(), 0.0
    for row, (pair, q) in zip(rows, SHAPES, strict=True):
        assert (row["pair_tokens"], row["question_tokens"]) == (pair, q)
        question, sentences = pairs(tok, pair, q, 4)
        assert (question, sentences) == (row["question"], row["sentences"]), pair
        qids = question_ids(tok, question)
        assert len(qids) == q
        for s in sentences:
            ids, types = pair_ids(tok, qids, s)
            ref = tok.encode(question, s)
            assert len(ids) == pair and (ids, types) == (ref.ids, ref.type_ids), (pair, s)
        logits = ort_score(sess, tok, qids, sentences)
        for k in ("logits_batch4", "logits_batch1"):
            worst = max(worst, float(np.abs(logits - np.array(row[k])).max()))
    return worst


def bench_executable(profile):
    out = subprocess.run(["cargo", "bench"] + profile + ["--bench", "reader", "--no-run",
                          "--message-format=json"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") \
                and msg["target"]["name"] == "reader":
            return msg["executable"]
    raise SystemExit("no reader bench executable in cargo's output")


def criterion_median_ms(batch, pair):
    path = os.path.join(TARGET, "criterion", "reader", f"primd-b{batch}", str(pair), "new",
                        "estimates.json")
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"] / 1e6


def maxrss_mib(stderr):
    return next(int(l.split()[1]) for l in stderr.splitlines()
                if l.startswith("maxrss_kib")) / 1024


def load_primd(bench):
    """Load time and peak RSS (GNU time: this child alone) of the bench binary loading
    the reader and scoring one pair, fresh process; and the kernel it chose."""
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kib %M", bench], capture_output=True,
                       text=True, env=dict(os.environ, PRIMD_READER_LOAD="1"), check=True)
    words = p.stdout.split()
    return float(words[words.index("load_ms") + 1]), maxrss_mib(p.stderr), \
        words[words.index("kernel") + 1]


def load_ort():
    code = ("import sys,time; sys.path.insert(0, %r); import reader as b; "
            "t=time.perf_counter(); s=b.ort_session(); tok=b.tokenizer(); "
            "l=(time.perf_counter()-t)*1e3; q, ss = b.pairs(tok, 48, 14, 1); "
            "b.ort_score(s, tok, b.question_ids(tok, q), ss); print('load_ms', l)")
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kib %M", sys.executable, "-c",
                        code % os.path.dirname(os.path.abspath(__file__))],
                       capture_output=True, text=True, check=True)
    return float(p.stdout.split()[1]), maxrss_mib(p.stderr)


def cpu():
    name, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and name == "?":
                name = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    have = [x for x in ("avx2", "avx512_vnni", "avx_vnni") if x in flags]
    return f"{name} ({', '.join(have) or 'no avx2'})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-cargo", action="store_true",
                    help="reuse the last criterion results instead of running cargo bench")
    ap.add_argument("--measure", action="store_true",
                    help="build the bench in the `measure` profile (Cargo.toml), what "
                    "docs/benchmarks.md measures; default: `cargo bench`'s bench profile")
    args = ap.parse_args()
    profile = ["--profile", "measure"] if args.measure else []
    if not args.skip_cargo:
        subprocess.run(["cargo", "bench"] + profile + ["--bench", "reader"], cwd=ROOT,
                       check=True)
    bench = bench_executable(profile)
    tok = tokenizer()
    worst = check_pairs(tok, bench)
    ort = bench_ort(tok)
    import onnxruntime

    date = subprocess.run(["date"], capture_output=True, text=True).stdout.strip()
    print(f"\n{date}; {cpu()}; profile {'measure' if args.measure else 'bench'}; "
          f"onnxruntime {onnxruntime.__version__}")
    print("\nReader per call, one thread, sentences' tokenisation included, median ms "
          "(onnxruntime: min in brackets; `ort run` = session.run alone)\n")
    print("| pair tokens | batch | primd | ort | ort run | primd / ort |")
    print("| --- | --- | --- | --- | --- | --- |")
    for pair, _ in SHAPES:
        for batch in BATCHES:
            p = criterion_median_ms(batch, pair)
            (o, omin), (r, _) = ort[pair, batch]
            print(f"| {pair} | {batch} | {p:.2f} | {o:.2f} ({omin:.2f}) | {r:.2f} "
                  f"| {p / o:.2f}x |")
    print(f"\nlogits, onnxruntime against primd: max |Δ| {worst:.3f}")
    load_ms, rss, kernel = load_primd(bench)
    print(f"primd qgemm kernel: {kernel}")
    print("\n| engine | load, ms | peak RSS after load + one pair, MiB | model file, MB |")
    print("| --- | --- | --- | --- |")
    size = os.path.getsize(os.path.join(READER_DIR, "model.onnx")) / 1e6
    print(f"| primd (bench binary) | {load_ms:.0f} | {rss:.0f} | {size:.1f} |")
    load_ms, rss = load_ort()
    print(f"| onnxruntime (incl. Python) | {load_ms:.0f} | {rss:.0f} | {size:.1f} |")


if __name__ == "__main__":
    main()
