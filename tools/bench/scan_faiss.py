#!/usr/bin/env python3
"""Reference for benches/scan.rs: faiss IndexBinaryFlat(384) top-100, one thread.

Same shape as the Rust bench (100k and 1M random 48-byte codes, k = 100, one query at a
time); prints the median over the queries, in ms per query and in GB/s of codes scanned.

    python3 -m venv /tmp/bench && /tmp/bench/bin/pip install -r tools/bench/requirements.txt
    /tmp/bench/bin/python tools/bench/scan_faiss.py [--queries 30]
"""

import argparse
import time

import faiss
import numpy as np

CODE_BYTES = 48
K = 100


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=30, help="timed queries per size (>= 20)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    args = ap.parse_args()
    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(1234)
    print(f"faiss {faiss.__version__}, 1 thread, k={K}, {CODE_BYTES}-byte codes")
    for n in args.sizes:
        codes = rng.integers(0, 256, size=(n, CODE_BYTES), dtype=np.uint8)
        queries = rng.integers(0, 256, size=(args.queries + 3, CODE_BYTES), dtype=np.uint8)
        index = faiss.IndexBinaryFlat(CODE_BYTES * 8)
        index.add(codes)
        times = []
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            index.search(q[None, :], K)
            if i >= 3:  # first queries warm the caches and page in the codes
                times.append(time.perf_counter() - t0)
        med = float(np.median(times))
        gbps = n * CODE_BYTES / med / 1e9
        print(f"n={n:>8}: {med * 1e3:8.3f} ms/query (median of {len(times)}), {gbps:6.2f} GB/s")


if __name__ == "__main__":
    main()
