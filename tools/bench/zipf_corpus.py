#!/usr/bin/env python3
"""A reproducible synthetic corpus with a Zipf vocabulary, for lexical-search benchmarks.

Issue #14 item 7 asks for lexical query latency at 2.4k / 100k / 1M passages. This
writes such a corpus, the same bytes for the same arguments on any machine (standard
library only; Python's seeded Mersenne Twister and `random.choices` with cumulative
weights, both stable across CPython 3 versions):

- vocabulary: `--vocab` (50,000) distinct pseudo-words built from syllables
  (onset + vowel + coda, 1-4 syllables), ranked shortest first (frequent words are short,
  as in natural language);
- word frequencies: Zipf, p(rank r) proportional to r^-s, s = `--zipf` (1.1);
- passages: `--passages` N of them, 100-180 words each (uniform), 1-3 title words from
  the mid-frequency band, as `{"id", "title", "text"}` JSONL (ids `z<i>`);
- queries: `--queries` (200) of 8-12 consecutive words cut from randomly chosen passages,
  each word of 4+ letters misspelt with probability `--typo` (0.25: one substitution,
  deletion or transposition of adjacent letters), as `{"id", "text"}` JSONL, with a
  qrels.tsv naming the passage each was cut from (so quality can be checked too).

    python3 zipf_corpus.py --passages 100000 --out zipf-100k
    # -> zipf-100k/corpus.jsonl, zipf-100k/queries.jsonl, zipf-100k/qrels.tsv

Roughly 0.6 KB per passage on disk (1M passages: 612 MB, under a minute).
"""

import argparse
import itertools
import json
import os
import random
import sys
import time

ONSETS = ["", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t",
          "v", "w", "z", "br", "cr", "dr", "fl", "gr", "pl", "pr", "st", "tr", "ch", "sh", "th"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io"]
CODAS = ["", "", "", "n", "r", "s", "l", "m", "t", "nd", "st", "rk"]
SYLLABLES_P = [(1, 0.15), (2, 0.40), (3, 0.30), (4, 0.15)]
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def vocabulary(size, rng):
    """`size` distinct pseudo-words, shortest first (ties in generation order)."""
    counts, weights = zip(*SYLLABLES_P)
    seen, words = set(), []
    while len(words) < size:
        n = rng.choices(counts, weights=weights)[0]
        w = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(n))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return sorted(words, key=len)  # stable: equal lengths keep generation order


def misspell(word, rng):
    i = rng.randrange(len(word))
    kind = rng.random()
    if kind < 0.5:  # substitution by a different letter
        c = rng.choice([x for x in LETTERS if x != word[i]])
        return word[:i] + c + word[i + 1:]
    if kind < 0.75:  # deletion
        return word[:i] + word[i + 1:]
    i = min(i, len(word) - 2)  # transposition of two adjacent letters
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, required=True, help="number of passages N")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent s")
    ap.add_argument("--min-words", type=int, default=100)
    ap.add_argument("--max-words", type=int, default=180)
    ap.add_argument("--typo", type=float, default=0.25,
                    help="probability that a query word of 4+ letters is misspelt")
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    t0 = time.time()

    # Independent streams, so changing --queries does not change the corpus.
    vocab = vocabulary(args.vocab, random.Random(f"{args.seed}/vocab"))
    cum = list(itertools.accumulate(r ** -args.zipf for r in range(1, args.vocab + 1)))
    title_band = vocab[args.vocab // 20: args.vocab // 2]
    rng = random.Random(f"{args.seed}/corpus")
    qrng = random.Random(f"{args.seed}/queries")
    sources = sorted(qrng.sample(range(args.passages), min(args.queries, args.passages)))
    source_set = set(sources)
    qrng.shuffle(sources)  # query order independent of passage order
    order = {p: k for k, p in enumerate(sources)}
    queries = [None] * len(sources)

    os.makedirs(args.out, exist_ok=True)
    total_words = 0
    with open(os.path.join(args.out, "corpus.jsonl"), "w") as f:
        for i in range(args.passages):
            n = rng.randint(args.min_words, args.max_words)
            words = rng.choices(vocab, cum_weights=cum, k=n)
            title = " ".join(rng.choices(title_band, k=rng.randint(1, 3)))
            total_words += n
            f.write(json.dumps({"id": f"z{i}", "title": title, "text": " ".join(words)}) + "\n")
            if i in source_set:
                qlen = qrng.randint(8, 12)
                start = qrng.randrange(n - qlen + 1)
                q = [misspell(w, qrng) if len(w) >= 4 and qrng.random() < args.typo else w
                     for w in words[start:start + qlen]]
                queries[order[i]] = (f"q{order[i]}", " ".join(q), f"z{i}")
            if (i + 1) % 100_000 == 0:
                print(f"  {i + 1:,} passages, {time.time() - t0:.0f} s", file=sys.stderr)
    with open(os.path.join(args.out, "queries.jsonl"), "w") as f:
        for qid, text, _ in queries:
            f.write(json.dumps({"id": qid, "text": text}) + "\n")
    with open(os.path.join(args.out, "qrels.tsv"), "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, _, pid in queries:
            f.write(f"{qid}\t{pid}\t1\n")
    print(f"{args.passages:,} passages ({total_words / max(1, args.passages):.0f} words on "
          f"average), {len(queries)} queries -> {args.out}/ in {time.time() - t0:.0f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
