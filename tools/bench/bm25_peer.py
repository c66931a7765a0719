#!/usr/bin/env python3
"""The Python BM25 peer for primd's lexical speed benchmark (issue #14, "Speed"): bm25s.

Indexes a corpus JSONL (`{"id", "title", "text"}`) with bm25s (PyPI) using the same
BM25 as primd (Lucene idf and length normalisation, k1 1.2, b 0.75), the same text
(title + "\\n" + text, as `build-index` indexes it; optionally cut into build-index's
windows with --chunk-words/--overlap) and the same normalisation (primd's lower_words:
lower case, letters/digits, apostrophes inside words), with two tokenisations:

    words   the normalised words, whitespace-split, numbers spelled out ("1881" -> "one
            thousand eight hundred eighty one eighteen eighty one")
    char4   character 4-grams of those words joined and boundary-marked, as primd's
            default analyzer (version 4): "the cat" -> "_the_cat_" -> _the the_ he_c e_ca
            _cat cat_; a marked text shorter than 4 kept whole

and reports the index build time and the single-thread latency of one query at a time
(`retrieve([tokens], k=10)`, median and p90 over the queries, after a warm-up), plus
hit@1 / hit@10 when --qrels is given (a cross-check that the peer really ranks). The
latency excludes query tokenisation, which is reported separately (our Python, not
bm25s's). Backends: bm25s's numpy backend, and its numba backend if numba is installed.

    python3 bm25_peer.py --corpus zipf-100k/corpus.jsonl --queries zipf-100k/queries.jsonl \\
        [--qrels zipf-100k/qrels.tsv] [--tokens words,char4] [--backends numpy,numba]
    python3 bm25_peer.py --corpus ../shared/data/spoken-squad/corpus.jsonl \\
        --queries ../shared/data/spoken-squad/queries.jsonl \\
        --qrels ../shared/data/spoken-squad/qrels.tsv --chunk-words 180 --overlap 20

Single thread: OMP/MKL/OpenBLAS/numba thread counts are set to 1 before numpy loads, and
bm25s runs with n_threads=0. Token ids are kept in one flat int32 array, so 1M passages
of words fit in a few GB.
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
os.environ.setdefault("DISABLE_TQDM", "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "eval"))
import dataset  # noqa: E402
from qrels import load_qrels  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402

# primd's lower_words (src/words.rs) as one regex, version 1 (no folding; the
# published peer figures were measured with it): a word
# starts with a letter or digit and goes on through letters, digits and apostrophes.
WORD = re.compile(r"[^\W_](?:[^\W_]|')*")


def words(text):
    # Lower-cased after matching, as lower_words checks the original character.
    return [w.lower() for w in WORD.findall(text)]


def char4(ws):
    if not ws:
        return []
    m = "_" + "_".join(ws) + "_"
    if len(m) <= 4:
        return [m]
    return [m[i:i + 4] for i in range(len(m) - 3)]


# Numbers spelled out as primd's analyzer version 4 does (tools/eval/spell_numbers.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "eval"))
from spell_numbers import spell  # noqa: E402

TOKENIZERS = {"words": lambda t: spell(words(t)), "char4": lambda t: char4(spell(words(t)))}


def passages(path, chunk_words, overlap):
    """(doc id, indexed text) per passage, cut like build-index (corpus.rs) if asked."""
    for d in dataset.records(path):
        for doc_id, _, title, body in dataset.chunk([d], chunk_words, overlap):
            yield doc_id, dataset.passage_text(title, body)


class TokenIds:
    """Documents' token ids in one flat int32 array; a sequence of per-document lists
    (what bm25s's index() iterates over, twice)."""

    def __init__(self, flat, offsets):
        self.flat, self.offsets = flat, offsets

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, i):
        return self.flat[self.offsets[i]:self.offsets[i + 1]].tolist()

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


def tokenize_corpus(path, tok, chunk_words, overlap):
    vocab, flat, offsets, doc_ids = {}, [], [0], []
    chunks = []
    for doc_id, text in passages(path, chunk_words, overlap):
        ids = [vocab.setdefault(t, len(vocab)) for t in tok(text)]
        chunks.append(np.asarray(ids, dtype=np.int32))
        offsets.append(offsets[-1] + len(ids))
        doc_ids.append(doc_id)
        if len(chunks) >= 10_000:  # keep Python lists short-lived
            flat.append(np.concatenate(chunks))
            chunks = []
    if chunks:
        flat.append(np.concatenate(chunks))
    flat = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int32)
    return TokenIds(flat, np.asarray(offsets, dtype=np.int64)), vocab, doc_ids


def rss_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def run(args, tok_name, backend, queries, qrels, tokenized):
    import bm25s

    tok = TOKENIZERS[tok_name]
    ids, vocab, doc_ids, t_tok = tokenized
    ntok = len(ids.flat)

    retriever = bm25s.BM25(k1=args.k1, b=args.b, method="lucene", idf_method="lucene",
                           backend=backend)
    t0 = time.perf_counter()
    # bm25s accepts any object with .ids (per-document token ids) and .vocab (token -> id).
    retriever.index(SimpleNamespace(ids=ids, vocab=vocab), show_progress=False)
    t_index = time.perf_counter() - t0
    postings = len(retriever.scores["data"])

    t0 = time.perf_counter()
    qtoks = [[t for t in tok(text) if t in vocab] for _, text in queries]
    t_qtok = (time.perf_counter() - t0) / max(1, len(queries))
    unknown = sum(not q for q in qtoks)
    if unknown:
        # bm25s refuses a query of unknown tokens; the answer is empty, and not timed.
        print(f"bm25_peer: {unknown} of {len(qtoks)} queries have no term the corpus knows: "
              "answered empty, left out of the latencies", file=sys.stderr)

    def one(q):
        if not q:
            return []
        docs, _ = retriever.retrieve([q], k=args.k, n_threads=0, show_progress=False,
                                     backend_selection=backend)
        return docs[0]

    for q in qtoks[: args.warmup]:  # numba compiles on first use
        one(q)
    lat, results = [], []
    for q in qtoks:
        t0 = time.perf_counter()
        r = one(q)
        if q:
            lat.append((time.perf_counter() - t0) * 1000)
        results.append(r)
    lat.sort()
    quality = ""
    if qrels is not None:
        h1 = h10 = 0
        for (qid, _), r in zip(queries, results):
            rel = qrels.get(qid, set())
            hits = [doc_ids[i] in rel for i in r[:10]]
            h1 += bool(hits and hits[0])
            h10 += any(hits)
        quality = f"{h1 / len(queries):.3f} / {h10 / len(queries):.3f}"
    return [f"{len(doc_ids):,}", tok_name, backend, f"{ntok / 1e6:.1f}M", f"{postings / 1e6:.1f}M",
            f"{t_tok:.1f}", f"{t_index:.1f}", f"{statistics.median(lat):.3f}",
            f"{lat[int(0.9 * (len(lat) - 1))]:.3f}", f"{t_qtok * 1000:.3f}", quality,
            f"{rss_gb():.1f}"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    dataset.add_arguments(ap, ["corpus", "queries", "qrels"])  # qrels: adds hit@1 / hit@10
    ap.add_argument("--tokens", default="words,char4")
    ap.add_argument("--backends", default="numpy,numba")
    ap.add_argument("--k1", type=float, default=1.2)
    ap.add_argument("--b", type=float, default=0.75)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--chunk-words", type=int, default=0, help="0: one passage per line")
    ap.add_argument("--overlap", type=int, default=20)
    ap.add_argument("--max-queries", type=int, default=0, help="0: all")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--no-header", action="store_true")
    args = ap.parse_args()
    dataset.resolve(ap, args, ["corpus", "queries"], ["qrels"])

    import bm25s

    queries = []
    for q in dataset.records(args.queries):
        # a recognizer stream (stt/*.jsonl) is queried with its final
        queries.append((str(q["id"]), q["final"] if "final" in q else q["text"]))
    if args.max_queries:
        queries = queries[: args.max_queries]
    qrels = load_qrels(args.qrels) if args.qrels else None

    backends = args.backends.split(",")
    if "numba" in backends:
        if importlib.util.find_spec("numba") is None:
            print("note: numba not installed, numba backend skipped", file=sys.stderr)
            backends.remove("numba")

    if not args.no_header:
        print(f"bm25s {bm25s.__version__}, numpy {np.__version__}, k1 {args.k1}, b {args.b}, "
              f"top-{args.k}, {len(queries)} queries from {args.queries}, one thread\n")
        print("| passages | tokens | backend | corpus tokens | postings | tokenise s | "
              "index s | query ms p50 | query ms p90 | query tokenise ms | hit@1 / hit@10 | "
              "peak RSS GB |")
        print("| " + " | ".join(["---"] * 12) + " |")
    for tok_name in args.tokens.split(","):
        t0 = time.perf_counter()
        ids, vocab, doc_ids = tokenize_corpus(args.corpus, TOKENIZERS[tok_name],
                                              args.chunk_words, args.overlap)
        tokenized = (ids, vocab, doc_ids, time.perf_counter() - t0)
        for backend in backends:
            row = run(args, tok_name, backend, queries, qrels, tokenized)
            print("| " + " | ".join(row) + " |", flush=True)
            gc.collect()
        del ids, vocab, doc_ids, tokenized
        gc.collect()


if __name__ == "__main__":
    main()
