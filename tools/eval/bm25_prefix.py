#!/usr/bin/env python3
"""Word-prefix replay with a plain BM25 retriever: the study's retriever, on your data.

`primd eval` measures when a query stabilises with primd's dense retriever. To say
whether dense retrieval stabilises earlier or later than the lexical BM25 of the
study (seeds/002), the same measures must be taken with BM25 on the *same* corpus and
questions; this script does that, with the same definitions and the same text
normalisation (lower case, letters/digits/inner apostrophes, single spaces):

- t_sc: smallest t after which the top-1 document never changes;
- t_suf at k = 1, 3, 5, 10: smallest t with the relevant document in the top-k;
- favourable slice: relevant in the top-k at the full question;
- streamable (H >= theta*L) with t* = t_suf at top-3 on the favourable slice, t_sc else.

BM25 (k1 = 1.2, b = 0.75, title + text, no stop words, no stemming) over the corpus's
documents. With --primd-records (the prefix_records.jsonl that `primd eval --out`
writes) it also compares the two retrievers query by query.

    python3 tools/eval/bm25_prefix.py --corpus ../shared/data/spoken-squad/corpus.jsonl \
        --queries ../shared/data/spoken-squad/queries.jsonl \
        --qrels ../shared/data/spoken-squad/qrels.tsv [--primd-records out/prefix_records.jsonl]
        [--spell-numbers]

Standard library only.
"""

import argparse
import heapq
import json
import math
import os
import re
import statistics
import sys
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dataset  # noqa: E402
from qrels import load_qrels  # noqa: E402
from spell_numbers import spell  # noqa: E402

KS = [1, 3, 5, 10]
# primd's normalisation (src/words.rs, word rules version 2), fillers aside.
words = dataset.lower_words


def qtype(text):
    first = next(iter(re.findall(r"[^\W_]+", text.lower())), "")
    return first if first in ("who", "what", "when", "where", "which", "how", "why") else "other"


class BM25:
    def __init__(self, docs, k1=1.2, b=0.75):
        self.ids = [d for d, _ in docs]
        self.postings = defaultdict(list)
        lens = []
        for i, (_, toks) in enumerate(docs):
            lens.append(len(toks))
            for w, tf in Counter(toks).items():
                self.postings[w].append((i, tf))
        n = len(docs)
        avg = sum(lens) / n
        self.idf = {w: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for w, p in self.postings.items()}
        self.norm = [k1 * (1 - b + b * l / avg) for l in lens]
        self.k1 = k1

    def top(self, query, k=10):
        scores = defaultdict(float)
        for w, qtf in Counter(query).items():
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i, tf in self.postings[w]:
                scores[i] += qtf * idf * tf * (self.k1 + 1) / (tf + self.norm[i])
        # Ties broken by document order, like a stable sort.
        best = heapq.nlargest(k, scores.items(), key=lambda kv: (kv[1], -kv[0]))
        return [self.ids[i] for i, _ in best]


def t_sc(top1):
    t = len(top1)
    while t > 1 and top1[t - 2] == top1[-1]:
        t -= 1
    return t


def t_suf(ranks, k):
    for t, r in enumerate(ranks, 1):
        if r is not None and r < k:
            return t
    return None


def hidden(n, t, l_ms, wps):
    return min(l_ms, max(0.0, (n - t) / wps * 1000))


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    dataset.add_arguments(ap, ["corpus", "queries", "qrels"])
    ap.add_argument("--primd-records", help="prefix_records.jsonl from primd eval --out")
    ap.add_argument("--primd-retriever", default="dense",
                    help="which retriever's records to compare (primd eval writes one "
                    "record per retriever and query)")
    ap.add_argument("--out", help="write BM25's per-query records here (JSON lines)")
    ap.add_argument("--spell-numbers", action="store_true",
                    help="spell numbers out as words on both sides, as primd's analyzer "
                    "version 4 does (spell_numbers.py): to compare with a primd index built "
                    "since; the study's BM25 keeps digits")
    args = ap.parse_args()
    spelled = spell if args.spell_numbers else (lambda ws: ws)
    dataset.resolve(ap, args, ["corpus", "queries", "qrels"])

    docs = []
    for d in dataset.records(args.corpus):
        docs.append((d["id"], spelled(words(d.get("title", "") + " " + d["text"]))))
    bm25 = BM25(docs)
    qrels = load_qrels(args.qrels)
    recs = {}
    for q in dataset.records(args.queries):
        rel = qrels.get(q["id"])
        toks = words(q["text"])
        if not rel or not toks:
            continue
        top1, ranks = [], []
        for t in range(1, len(toks) + 1):
            top = bm25.top(spelled(toks[:t]))
            top1.append(top[0] if top else None)
            ranks.append(next((i for i, d in enumerate(top) if d in rel), None))
        n = len(toks)
        recs[q["id"]] = {"id": q["id"], "qtype": qtype(q["text"]), "n": n, "t_sc": t_sc(top1),
                         "t_suf": [t_suf(ranks, k) for k in KS],
                         "favourable": [ranks[-1] is not None and ranks[-1] < k for k in KS]}
    if args.out:
        with open(args.out, "w") as f:
            for r in recs.values():
                f.write(json.dumps(r) + "\n")

    def summary(name, rs):
        rs = list(rs)
        n = len(rs)
        k3 = KS.index(3)
        print(f"\n### {name}: {n} queries\n")
        print("| measure | value |\n| --- | --- |")
        print(f"| φ_sc mean / median | {mean([r['t_sc'] / r['n'] for r in rs]):.3f} / "
              f"{statistics.median([r['t_sc'] / r['n'] for r in rs]):.3f} |")
        for s, k in enumerate(KS):
            fav = [r for r in rs if r["favourable"][s]]
            phis = [r["t_suf"][s] / r["n"] for r in fav]
            print(f"| top-{k}: favourable, φ_suf mean / median | {len(fav) / n:.1%}, "
                  f"{mean(phis):.3f} / {statistics.median(phis) if phis else float('nan'):.3f} |")
        for l_ms, wps, theta in [(600, 3, 0.8), (1000, 3, 0.8), (200, 3, 0.8), (600, 3, 0.5)]:
            def ok(r):
                t = r["t_suf"][k3] if r["favourable"][k3] else r["t_sc"]
                return hidden(r["n"], t, l_ms, wps) >= theta * l_ms - 1e-6
            fav = [r for r in rs if r["favourable"][k3]]
            rest = [r for r in rs if not r["favourable"][k3]]
            share = lambda xs: f"{sum(map(ok, xs)) / len(xs):.1%}" if xs else "–"  # noqa: E731
            print(f"| streamable L={l_ms} δ={wps} θ={theta}: all / favourable / rest | "
                  f"{share(rs)} / {share(fav)} / {share(rest)} |")
        return rs

    summary("BM25", recs.values())
    if args.primd_records:
        dense = {}
        for line in open(args.primd_records):
            r = json.loads(line)
            if r.get("retriever", args.primd_retriever) == args.primd_retriever:
                dense[r["id"]] = r
        both = [i for i in recs if i in dense]
        # Agreement: with --primd-retriever lexical on an index built with
        # `build-index --analyzer words --chunk-words 0`, both sides are the same BM25;
        # they can differ only on near-ties (f32 in primd, f64 here) and where the two
        # normalisations split a word differently.
        same_n = [i for i in both if recs[i]["n"] == dense[i]["n"]]
        print(f"\n### agreement, primd {args.primd_retriever} vs this BM25 "
              f"({len(same_n)} queries with the same word count)\n")
        print("| measure | primd | this script | identical per query |\n| --- | --- | --- | --- |")
        for s, k in enumerate(KS):
            hp = mean([dense[i]["favourable"][s] for i in same_n])
            hb = mean([recs[i]["favourable"][s] for i in same_n])
            eq = mean([dense[i]["favourable"][s] == recs[i]["favourable"][s] for i in same_n])
            print(f"| hit@{k} (full question) | {hp:.4f} | {hb:.4f} | {eq:.2%} |")
        eq_sc = mean([dense[i]["t_sc"] == recs[i]["t_sc"] for i in same_n])
        print(f"| t_sc (top-1 stable from word t) | | | {eq_sc:.2%} |")
        for s, k in enumerate(KS):
            eq = mean([dense[i]["t_suf"][s] == recs[i]["t_suf"][s] for i in same_n])
            print(f"| t_suf@{k} | | | {eq:.2%} |")
        print(f"\n### primd {args.primd_retriever} vs BM25, query by query ({len(both)} queries in both)\n")
        mism = sum(recs[i]["n"] != dense[i]["n"] for i in both)
        if mism:
            print(f"(warning: {mism} queries have different word counts)")
        k3 = KS.index(3)
        fav_both = [i for i in both if recs[i]["favourable"][k3] and dense[i]["favourable"][k3]]
        earlier = sum(dense[i]["t_suf"][k3] < recs[i]["t_suf"][k3] for i in fav_both)
        later = sum(dense[i]["t_suf"][k3] > recs[i]["t_suf"][k3] for i in fav_both)
        print("| measure | value |\n| --- | --- |")
        print(f"| favourable at top-3 for both | {len(fav_both)} |")
        print(f"| … dense reaches top-3 earlier / same / later | {earlier} / "
              f"{len(fav_both) - earlier - later} / {later} |")
        print(f"| … mean φ_suf@3 dense vs BM25 | {mean([dense[i]['t_suf'][k3] / dense[i]['n'] for i in fav_both]):.3f} "
              f"vs {mean([recs[i]['t_suf'][k3] / recs[i]['n'] for i in fav_both]):.3f} |")
        only_d = sum(dense[i]["favourable"][k3] and not recs[i]["favourable"][k3] for i in both)
        only_b = sum(recs[i]["favourable"][k3] and not dense[i]["favourable"][k3] for i in both)
        print(f"| favourable only for dense / only for BM25 | {only_d} / {only_b} |")
        sc_e = sum(dense[i]["t_sc"] < recs[i]["t_sc"] for i in both)
        sc_l = sum(dense[i]["t_sc"] > recs[i]["t_sc"] for i in both)
        print(f"| t_sc dense earlier / same / later | {sc_e} / {len(both) - sc_e - sc_l} / {sc_l} |")
        # Where in the question the first word that BM25 weights most sits, for the
        # queries where dense is later: a proxy for "entity position".
        for t in (1, 2, 3):
            d1 = sum(dense[i]["favourable"][KS.index(10)] and dense[i]["t_suf"][KS.index(10)] <= t for i in both)
            b1 = sum(recs[i]["favourable"][KS.index(10)] and recs[i]["t_suf"][KS.index(10)] <= t for i in both)
            print(f"| relevant in the top-10 after ≤ {t} word(s): dense / BM25 | "
                  f"{d1 / len(both):.1%} / {b1 / len(both):.1%} |")


if __name__ == "__main__":
    main()
