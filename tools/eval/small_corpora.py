#!/usr/bin/env python3
"""The confidence on small, single-topic corpora and short questions (issue #43).

A kiosk's corpus is a few dozen passages about one thing (the museum demo: 52), and
its visitors ask short questions ("is there a cafe"). The dev set's corpus is 2,067
passages of 48 Wikipedia articles, its questions mostly 6-13 words. This script makes
the dev set look like a kiosk too: one index per article (43 passages on average, all
on one topic), asked its own article's questions (each has its answer there) and a
sample of the other articles' questions (none has: the off-topic questions a kiosk
gets). Next to it, a large corpus: the passages of the even-numbered articles (1,030,
"half"), asked 1,500 of the questions (those of odd articles have no answer there), typed
and as the recorded recognizer finals (held out of the fit). Indexes are built with
build-index (the embedding is what costs: 1,030 + 519 passages), so the article
indexes are those of every other odd-numbered article (12 of 48, 1, 5, 9, ...).

It runs `primd search --k 10` once per setting and retriever and keeps the result
rows (top-3 scores, the top-1's cosine, the question's word count, whether the top-1
is relevant) in `OUT/rows-<retriever>.jsonl`, so that fits and reports are rerun
without searching again (`--fit-only`). Then, per retriever:

- the fit: Platt scaling of `calibrate.features` (+ the word feature, see `features`)
  on the typed questions of every setting but the finals, article-level folds held
  out (each article's questions, in whichever setting, are fitted on the other
  articles only) for the figures, the whole set for the coefficients;
- AUROC (confidence as a detector of a wrong top-1) and accuracy at the threshold 0.5
  (the `evidence` flag right: "ok" with a relevant top-1, "low" without), per question
  length bucket and setting, for the model in `src/confidence.rs` before this change
  (`--old`) and the new one.

    python3 tools/eval/small_corpora.py --data $DATA --streams $STREAMS --out /tmp/sc \\
        [--primd target/release/primd --build-index target/release/build-index]

Standard library only; about 15 CPU-minutes on an x86 core for the indexes (debug
build with optimised dependencies), a few minutes for the searches.
"""

import argparse
import collections
import json
import math
import os
import random
import subprocess
import tempfile

import dataset
from calibrate import auroc_wrong, fit, predict
from qrels import load_qrels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RETRIEVERS = ["hybrid", "dense", "lexical"]
# Off-topic questions asked of each article's index (from the other articles).
OFF_TOPIC_PER_ARTICLE = 40
# Questions asked of the large corpus (a seeded sample: the searches are what costs).
HALF_QUESTIONS = 1500
BUCKETS = [(1, 4), (5, 6), (7, 9), (10, 12), (13, 99)]

# src/confidence.rs before issue #43: (intercept, margin, gap3[, top-1 cosine]).
OLD = {
    "dense": [-4.9344, 9.1802, 15.0134, 5.6761],
    "lexical": [-2.5474, 5.4935, 7.3583],
    "hybrid": [-5.1363, 6.0896, 5.7794, 6.5107],
}


def article(pid):
    return pid.rsplit("_", 1)[0]


def build(args, corpus_rows, path):
    if os.path.exists(path):
        return
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in corpus_rows:
            f.write(json.dumps(r) + "\n")
    precision = ["--fp32"] if args.fp32 else []
    subprocess.run([args.build_index, "--model", args.model, "--input", f.name,
                    "--output", path, *precision], check=True, stderr=subprocess.DEVNULL)
    os.unlink(f.name)


def search(args, retriever, index, queries):
    """`primd search` of `queries` [(id, text)] → {id: result line}."""
    payload = "".join(json.dumps({"id": q, "text": t}) + "\n" for q, t in queries)
    extra = ["--no-reader"] if args.no_reader else []
    out = subprocess.run([args.primd, "search", "--model", args.model, "--index", index,
                          "--k", "10", "--retriever", retriever] + extra,
                         input=payload.encode(), capture_output=True, check=True).stdout
    return {json.loads(l)["id"]: json.loads(l) for l in out.decode().splitlines()}


def words(text):
    return len(text.split())


def rows_for(args, retriever, indexes, queries, finals, qrels, corpus_by_article):
    """Every setting's result rows for one retriever."""
    rows = []

    def add(setting, index, qs, passages, group):
        got = search(args, retriever, index, qs)
        for q, text in qs:
            res = got[q]["results"]
            if not res:
                continue
            rows.append({
                "setting": setting, "id": q, "words": words(text), "passages": passages,
                "article": group(q), "scores": [h["score"] for h in res[:3]],
                "dense": res[0].get("dense"), "label": int(res[0]["id"] in qrels.get(q, ())),
                # primd's own confidence as shipped (with the reader, when it ran).
                "confidence": got[q].get("confidence"),
                # The reader's logits ({best, top1}; absent without it).
                "reader": (got[q].get("context") or {}).get("reader"),
            })

    qart = {q: article(next(iter(qrels[q]))) for q, _ in queries}
    half_n = sum(len(v) for a, v in corpus_by_article.items() if int(a) % 2 == 0)
    sample = random.Random(7).sample(queries, min(HALF_QUESTIONS, len(queries)))
    add("half", indexes["half"], sample, half_n, qart.get)
    add("finals", indexes["half"], finals, half_n, qart.get)
    rng = random.Random(43)
    for a, idx in sorted(indexes["articles"].items()):
        own = [(q, t) for q, t in queries if qart[q] == a]
        others = [(q, t) for q, t in queries if qart[q] != a]
        off = rng.sample(others, min(OFF_TOPIC_PER_ARTICLE, len(others)))
        # An off-topic question is its own article's too: folds keep it with `a`.
        add("article", idx, own + off, len(corpus_by_article[a]), lambda q, a=a: a)
    return rows


def features(row, retriever, with_words):
    s = row["scores"] + [0.0] * (3 - len(row["scores"]))
    scale = (s[0] if s[0] > 0 else 1.0) if retriever == "lexical" else 1.0
    f = [(s[0] - s[1]) / scale, (s[0] - s[2]) / scale]
    if retriever != "lexical":
        f.append(row["dense"] or 0.0)
    if with_words:
        # Short questions: a short question's right passage is less close in meaning
        # (fewer words to share) and stands less clear of the others; 1/words is the
        # shape of both (a fixed gain per word would not saturate).
        f.append(1.0 / max(row["words"], 1))
    return f


def folded(rows, retriever, with_words, folds=6):
    """Confidence of each row from a fit that did not see its article."""
    arts = sorted({r["article"] for r in rows})
    conf = [0.0] * len(rows)
    for k in range(folds):
        held = set(arts[k::folds])
        train = [r for r in rows if r["article"] not in held and r["setting"] != "finals"]
        w = fit([features(r, retriever, with_words) for r in train], [r["label"] for r in train])
        for i, r in enumerate(rows):
            if r["article"] in held:
                conf[i] = predict(w, [features(r, retriever, with_words)])[0]
    return conf


def report(name, rows, conf, threshold=0.5):
    print(f"\n{name}")
    print("| setting | words | questions | top-1 right | AUROC(wrong) | evidence right at "
          f"{threshold} | right top-1 flagged low | wrong top-1 passed ok |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for setting in ["article", "half", "finals"]:
        for lo, hi in BUCKETS + [(1, 99)]:
            idx = [i for i, r in enumerate(rows)
                   if r["setting"] == setting and lo <= r["words"] <= hi]
            if not idx:
                continue
            ys = [rows[i]["label"] for i in idx]
            cs = [conf[i] for i in idx]
            right = sum(ys)
            acc = sum((c >= threshold) == bool(y) for c, y in zip(cs, ys)) / len(ys)
            fl = sum(1 for c, y in zip(cs, ys) if y and c < threshold)
            ps = sum(1 for c, y in zip(cs, ys) if not y and c >= threshold)
            label = "all" if (lo, hi) == (1, 99) else (f"{lo}-{hi}" if hi < 99 else f"{lo}+")
            print(f"| {setting} | {label} | {len(ys)} | {right / len(ys):.3f} | "
                  f"{auroc_wrong(cs, ys):.3f} | {acc:.3f} | "
                  f"{fl / right if right else float('nan'):.3f} | "
                  f"{ps / (len(ys) - right) if len(ys) > right else float('nan'):.3f} |")


def main():
    ap = argparse.ArgumentParser()
    dataset.add_arguments(ap, ["corpus", "queries", "qrels", "streams"])
    ap.add_argument("--out", required=True, help="indexes and result rows go here")
    ap.add_argument("--model", default=os.path.join(ROOT, "models"))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ap.add_argument("--primd", default=os.path.join(target, "release", "primd"))
    ap.add_argument("--build-index", default=os.path.join(target, "release", "build-index"))
    ap.add_argument("--retriever", default=",".join(RETRIEVERS))
    ap.add_argument("--fit-only", action="store_true", help="reuse OUT/rows-*.jsonl")
    ap.add_argument("--no-reader", action="store_true",
                    help="search without the reader (primd search --no-reader)")
    ap.add_argument("--fp32", action="store_true", help="build the indexes with the fp32 "
                    "model (primd search then embeds the questions with it too): 14x "
                    "quicker than int8 in a debug build, the same retrieval quality")
    args = ap.parse_args()
    dataset.resolve(ap, args, ["corpus", "queries", "qrels", "streams"])
    qrels = load_qrels(args.qrels)
    os.makedirs(os.path.join(args.out, "articles"), exist_ok=True)

    retrievers = [r for r in args.retriever.split(",") if r]
    if not args.fit_only:
        corpus = list(dataset.records(args.corpus))
        by_article = collections.defaultdict(list)
        for r in corpus:
            by_article[article(r["id"])].append(r)
        indexes = {"half": os.path.join(args.out, "half.idx"), "articles": {}}
        for a, rs in sorted(by_article.items(), key=lambda x: int(x[0])):
            if int(a) % 4 != 1:
                continue
            indexes["articles"][a] = os.path.join(args.out, "articles", f"{a}.idx")
            build(args, rs, indexes["articles"][a])
        build(args, [r for r in corpus if int(article(r["id"])) % 2 == 0], indexes["half"])
        queries = [(str(q["id"]), q["text"]) for q in dataset.records(args.queries)
                   if str(q["id"]) in qrels]
        finals = [(str(s["id"]), s["final"]) for s in dataset.records(args.streams)]
        for r in retrievers:
            rows = rows_for(args, r, indexes, queries, finals, qrels, by_article)
            with open(os.path.join(args.out, f"rows-{r}.jsonl"), "w") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")

    for r in retrievers:
        rows = [json.loads(l) for l in open(os.path.join(args.out, f"rows-{r}.jsonl"))]
        print(f"## {r}: primd's own confidence{' (--no-reader)' if args.no_reader else ''}")
        shipped(rows)
        old = predict(OLD[r], [features(x, r, False) for x in rows])
        report(f"## {r}: src/confidence.rs before (fit on the whole corpus only)", rows, old)
        for with_words in [False, True]:
            conf = folded(rows, r, with_words)
            report(f"## {r}: refit on every setting, article folds held out"
                   f"{', with 1/words' if with_words else ''}", rows, conf)
        train = [x for x in rows if x["setting"] != "finals"]
        for with_words in [False, True]:
            w = fit([features(x, r, with_words) for x in train], [x["label"] for x in train])
            print(f"\n// {r}{' +1/words' if with_words else ''}: "
                  f"[{', '.join(f'{v:.4f}' for v in w)}]")



def shipped(rows, threshold=0.5):
    """primd's own `confidence` (as `primd search` printed it) per setting: a right
    top-1 flagged `low`, a wrong one passed `ok`."""
    by = collections.defaultdict(list)
    for r in rows:
        if r.get("confidence") is not None:
            by[r["setting"]].append(r)
    for setting, rs in sorted(by.items()):
        right = [r for r in rs if r["label"]]
        wrong = [r for r in rs if not r["label"]]
        rl = sum(r["confidence"] < threshold for r in right) / max(1, len(right))
        wo = sum(r["confidence"] >= threshold for r in wrong) / max(1, len(wrong))
        print(f"  as shipped, {setting}: {len(rs)} questions, hit@1 {len(right) / len(rs):.3f}, "
              f"right top-1 low {rl:.3f}, wrong top-1 ok {wo:.3f}")


if __name__ == "__main__":
    main()
