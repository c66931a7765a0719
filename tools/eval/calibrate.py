#!/usr/bin/env python3
"""Fits primd's low-evidence confidence (issue #18) and measures it.

The confidence of a result list is the probability that its top-1 passage is relevant,
estimated from the list's own score gaps: a confident hit stands clear of the second and
third passages, a guess does not. Per retriever, a logistic regression (Platt scaling) on
two features of the returned scores s1 >= s2 >= s3:

    margin = (s1 - s2) / scale,   gap3 = (s1 - s3) / scale

where scale is 1 for the dense and hybrid scores (cosines and fused scores live on fixed
ranges) and s1 for the lexical retriever (a BM25 score grows with the query's length and
the corpus's statistics; a relative gap does not).

Fitted on the typed questions (`--queries`/`--qrels`) only; measured on the finals of the
recorded recognizer streams (`--streams`), which the fit never sees: AUROC of the
confidence for "top-1 is wrong", expected calibration error (10 equal-width bins), the
reliability table, and the share of wrong top-1s flagged at the threshold whose flag is
90% precise on the typed set, and at 0.5. Prints the coefficients as the Rust table of
`src/confidence.rs`. Standard library only.

    python3 tools/eval/calibrate.py --index ss.idx --fit-index ss-even.idx \\
        --queries $DATA/queries.jsonl --qrels $DATA/qrels.tsv --streams $STREAMS \\
        [--svg reliability.svg]

`ss-even.idx`: the passages of the even-numbered articles only (`id` "<article>_<n>"), so
that the questions of the odd ones have no answer in it.
"""

import argparse
import bisect
import json
import math
import os
import subprocess
import tempfile

import dataset
from qrels import load_qrels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RETRIEVERS = ["dense", "lexical", "hybrid"]


def search(args, retriever, queries_path, index=None):
    with open(queries_path, "rb") as stdin:
        out = subprocess.run([args.primd, "search", "--model", args.model, "--index",
                              index or args.index, "--k", "10", "--retriever", retriever],
                             stdin=stdin, capture_output=True, check=True).stdout
    return [json.loads(line) for line in out.decode().splitlines()]


def features(hits, retriever):
    s = [h["score"] for h in hits[:3]]
    s += [0.0] * (3 - len(s))
    scale = 1.0
    if retriever == "lexical":
        scale = s[0] if s[0] > 0 else 1.0
    f = [(s[0] - s[1]) / scale, (s[0] - s[2]) / scale]
    if retriever != "lexical":
        # How close the top-1 is in meaning, on the cosine's fixed scale: the one absolute
        # signal, which tells an off-topic question (no passage close) from a hard one.
        f.append(hits[0].get("dense") or 0.0)
    return f


def labelled(rows, qrels, retriever):
    xs, ys = [], []
    for r in rows:
        res = r["results"]
        if not res:
            continue
        xs.append(features(res, retriever))
        ys.append(1 if res[0]["id"] in qrels.get(str(r["id"]), ()) else 0)
    return xs, ys


def sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def fit(xs, ys, l2=1e-3, iters=50):
    """Logistic regression by Newton's method; w[0] is the intercept."""
    d = len(xs[0]) + 1
    w = [0.0] * d
    for _ in range(iters):
        g = [0.0] * d
        h = [[0.0] * d for _ in range(d)]
        for x, y in zip(xs, ys):
            v = [1.0, *x]
            p = sigmoid(sum(a * b for a, b in zip(w, v)))
            for i in range(d):
                g[i] += (p - y) * v[i]
                for j in range(d):
                    h[i][j] += p * (1 - p) * v[i] * v[j]
        for i in range(1, d):
            g[i] += l2 * w[i]
            h[i][i] += l2
        step = solve(h, g)
        w = [a - b for a, b in zip(w, step)]
        if max(abs(s) for s in step) < 1e-10:
            break
    return w


def solve(a, b):
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[c][c] != 0:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] if m[i][i] else 0.0 for i in range(n)]


def predict(w, xs):
    return [sigmoid(w[0] + sum(a * b for a, b in zip(w[1:], x))) for x in xs]


def auroc_wrong(conf, ys):
    """AUROC of (1 - confidence) as a detector of a wrong top-1."""
    right = sorted(c for c, y in zip(conf, ys) if y)
    wrong = [c for c, y in zip(conf, ys) if not y]
    if not right or not wrong:
        return float("nan")
    n = 0.0
    for c in wrong:
        lo, hi = bisect.bisect_left(right, c), bisect.bisect_right(right, c)
        n += len(right) - hi + 0.5 * (hi - lo)
    return n / (len(right) * len(wrong))


def reliability(conf, ys, bins=10):
    table, ece = [], 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        idx = [i for i, c in enumerate(conf) if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if not idx:
            continue
        mean_c = sum(conf[i] for i in idx) / len(idx)
        acc = sum(ys[i] for i in idx) / len(idx)
        ece += len(idx) / len(conf) * abs(mean_c - acc)
        table.append((lo, hi, len(idx), mean_c, acc))
    return table, ece


def flag_stats(conf, ys, threshold):
    flagged = [y for c, y in zip(conf, ys) if c < threshold]
    wrong = sum(1 for y in ys if not y)
    flagged_wrong = sum(1 for y in flagged if not y)
    precision = flagged_wrong / len(flagged) if flagged else float("nan")
    return len(flagged) / len(ys), precision, flagged_wrong / wrong if wrong else float("nan")


def threshold_at_precision(conf, ys, target=0.9):
    """The largest threshold whose low flag (confidence < t) is at least `target` precise."""
    best = 0.0
    for t in sorted(set(conf)):
        t_up = t + 1e-9
        _, prec, _ = flag_stats(conf, ys, t_up)
        if prec == prec and prec >= target:
            best = t_up
    return best


def threshold_ok_precision(conf, ys, target=0.9):
    """The smallest threshold at which the results left unflagged (confidence >= t) have
    a relevant top-1 at least `target` of the time."""
    for t in sorted(set(conf)):
        kept = [y for c, y in zip(conf, ys) if c >= t]
        if kept and sum(kept) / len(kept) >= target:
            return t
    return 1.0


def ok_precision(conf, ys, t):
    kept = [y for c, y in zip(conf, ys) if c >= t]
    return sum(kept) / len(kept) if kept else float("nan")


def svg(curves, path):
    w, h, pad = 360, 360, 40
    def px(x, y):
        return pad + x * (w - 2 * pad), h - pad - y * (h - 2 * pad)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             'font-family="sans-serif" font-size="11">',
             '<rect width="100%" height="100%" fill="white"/>']
    x0, y0 = px(0, 0)
    x1, y1 = px(1, 1)
    parts.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" stroke="#bbb" '
                 'stroke-dasharray="4"/>')
    parts.append(f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" '
                 'fill="none" stroke="black"/>')
    parts.append(f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle">confidence</text>')
    parts.append(f'<text x="12" y="{h / 2}" transform="rotate(-90 12 {h / 2})" '
                 'text-anchor="middle">share of top-1 relevant</text>')
    colours = ["#1f77b4", "#d62728", "#2ca02c"]
    for k, (name, table) in enumerate(curves):
        pts = " ".join("%.1f,%.1f" % px(mc, acc) for _, _, _, mc, acc in table)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{colours[k]}" '
                     'stroke-width="2"/>')
        parts.append(f'<text x="{pad + 8}" y="{pad + 14 * (k + 1)}" '
                     f'fill="{colours[k]}">{name}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    # queries: the typed questions (the fit); streams: their finals are the held-out check.
    dataset.add_arguments(ap, ["queries", "qrels", "streams"])
    ap.add_argument("--fit-index", help="an index of part of the corpus: the questions are "
                    "also run against it, where those of the missing part have no answer, so "
                    "the fit also learns what a question without an answer looks like")
    ap.add_argument("--model", default=os.path.join(ROOT, "models"))
    ap.add_argument("--primd", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "primd"))
    ap.add_argument("--retriever", default=",".join(RETRIEVERS))
    ap.add_argument("--svg", help="write the reliability curves (stream finals) here")
    args = ap.parse_args()
    dataset.resolve(ap, args, ["queries", "qrels", "streams"])
    qrels = load_qrels(args.qrels)

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for line in open(args.streams):
            s = json.loads(line)
            f.write(json.dumps({"id": s["id"], "text": s["final"]}) + "\n")
        finals_path = f.name

    coefs, curves = {}, []
    for r in [x for x in args.retriever.split(",") if x]:
        xt, yt = labelled(search(args, r, args.queries), qrels, r)
        if args.fit_index:
            # Each question once against the whole corpus and once against the part in
            # the fit index, where about half of them have no answer (a quarter of the fit).
            xp, yp = labelled(search(args, r, args.queries, args.fit_index), qrels, r)
            xt, yt = xt + xp, yt + yp
        xf, yf = labelled(search(args, r, finals_path), qrels, r)
        w = fit(xt, yt)
        if args.fit_index:
            xh, yh = labelled(search(args, r, finals_path, args.fit_index), qrels, r)
            ch = predict(w, xh)
            _, ece_h = reliability(ch, yh)
            fh, ph, rh = flag_stats(ch, yh, 0.5)
            print(f"\n{r}: stream finals on the fit index ({len(yh)}, top-1 right "
                  f"{sum(yh) / len(yh):.3f}): AUROC(wrong) {auroc_wrong(ch, yh):.3f}, ECE "
                  f"{ece_h:.3f}; at 0.5 flags {fh:.1%} (precision {ph:.3f}, {rh:.1%} of "
                  f"wrong top-1s)")
        coefs[r] = w
        ct, cf = predict(w, xt), predict(w, xf)
        table, ece = reliability(cf, yf)
        _, ece_t = reliability(ct, yt)
        t90 = threshold_at_precision(ct, yt)
        tok = threshold_ok_precision(ct, yt)
        print(f"\n## {r}: coefficients (intercept, margin, gap3[, top-1 cosine]) "
              f"{', '.join(f'{x:.4f}' for x in w)}")
        print(f"typed, fit set ({len(yt)}): top-1 right {sum(yt) / len(yt):.3f}, AUROC(wrong) "
              f"{auroc_wrong(ct, yt):.3f}, ECE {ece_t:.3f}")
        print(f"stream finals ({len(yf)}): top-1 right {sum(yf) / len(yf):.3f}, AUROC(wrong) "
              f"{auroc_wrong(cf, yf):.3f}, ECE {ece:.3f}")
        for name, t in [("0.5", 0.5), (f"{t90:.3f} (low flag 90% precise on typed)", t90),
                        (f"{tok:.3f} (unflagged top-1 90% right on typed)", tok)]:
            ft, pt, rt = flag_stats(ct, yt, t)
            ff, pf, rf = flag_stats(cf, yf, t)
            print(f"threshold {name}: typed flags {ft:.1%} (precision {pt:.3f}, "
                  f"{rt:.1%} of wrong top-1s); finals flags {ff:.1%} (precision {pf:.3f}, "
                  f"{rf:.1%} of wrong top-1s); unflagged top-1 right: typed "
                  f"{ok_precision(ct, yt, t):.3f}, finals {ok_precision(cf, yf, t):.3f}")
        print("| confidence bin | finals | mean confidence | top-1 relevant |")
        print("| --- | --- | --- | --- |")
        for lo, hi, n, mc, acc in table:
            print(f"| {lo:.1f}-{hi:.1f} | {n} | {mc:.3f} | {acc:.3f} |")
        curves.append((r, table))
    os.unlink(finals_path)
    if args.svg:
        svg(curves, args.svg)
    print("\n// src/confidence.rs (intercept, margin, gap3[, top-1 cosine])")
    for r, w in coefs.items():
        print(f"// {r}: [{', '.join(f'{x:.4f}' for x in w)}]")


if __name__ == "__main__":
    main()
