#!/usr/bin/env python3
"""Conversations made from a QA set, and the baselines of retrieving their turns.

`make` turns the questions of a QA set (corpus.jsonl with titles, queries.jsonl,
qrels.tsv; passage ids "<article>_<paragraph>" as Spoken-SQuAD's) into conversations
the way people hold them with a kiosk: a first question about an article; follow-ups
on the same article whose topic is replaced or left out (a pronoun: "when was it
built?", "there", "that", or ellipsis: "and the population?"); a switch to another
article, asked in full; its follow-ups. Only questions that name their article's topic
become follow-ups (so the same question "asked in full" exists: the upper bound), and
every question is used at most once, so a turn's id is its question's id and the
qrels apply as they are. Deterministic for a `--seed`. One JSON line per turn, in
conversation order (what `primd search` and `primd eval --conversations` read):

    {"id": "<question id>", "text": "and the population?", "conversation": "c17",
     "kind": "first" | "follow-up" | "switch", "form": "pronoun" | "there" | "that" |
     "ellipsis" | "full", "full": "<the question as written>", "article": "1"}

With `--derail`, the conversations are instead the ways a conversation derails (each
line then has a unique `id` and its question's id as `qid`):
- `interjection`: a first question and a follow-up about A, an off-topic question the
  corpus cannot answer (`OFF_TOPIC`), another follow-up about A (`after-interjection`);
  the same conversation without the interjection beside it (`no-interjection`);
- `repeat`: a first question and a follow-up about A, then the follow-up's final sent
  again 1-5 times (a recognizer that emits a final twice);
- `cue-less`: a first question about A, then a question of A whose topic words were
  dropped, not replaced ("What is the population?" for "What is the population of
  Warsaw?");
- `unanswerable`: a first question about A, then a question of another article C with
  C's topic replaced by a pronoun ("When was it founded?"): about A it has no answer,
  its evidence should be `low`;
- `agent-topic`: a first question about B, then the agent sets the topic to A's title
  (the line's `"topic"`, `{"cmd":"topic"}` on the socket) and a follow-up about A.

`baselines` runs `primd search` on such a file three ways, the turns alone, the
follow-ups in full (the upper bound), the previous turn's text prepended to every turn
after the first (plain concatenation), and `--conversation` (primd's own context) and
prints hit@1 / hit@10 / MRR@10 per turn kind. Standard library only.

    python3 tools/eval/conversations.py make --data ../shared/data/spoken-squad \
        --out ~/.cache/primd-conv/dev.jsonl [--seed 47 --conversations 300]
    python3 tools/eval/conversations.py baselines --index ss.idx \
        --conversations ~/.cache/primd-conv/dev.jsonl --qrels .../qrels.tsv

`replay` sends the same turns as finals through `primd run`, the daemon's own path:
`--via socket` to one daemon, one protocol session per conversation (closed after
it); `--via pipe` to one `primd run` per conversation on stdin (the pipe is one
conversation, a kiosk's visitor). With `--streams` (socket only), each turn is its
recorded recognizer stream instead: partials, then the recognizer's final. Prints the
same table.

    python3 tools/eval/conversations.py replay --via socket --index ss.idx \
        --conversations ~/.cache/primd-conv/dev.jsonl --qrels .../qrels.tsv
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
from collections import defaultdict

import dataset
from qrels import load_qrels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Names people use for an article's topic besides its title (acronyms, surnames).
ALIASES = {
    "Super Bowl 50": ["super bowl 50", "super bowl"],
    "Nikola Tesla": ["nikola tesla", "tesla"],
    "Martin Luther": ["martin luther", "luther"],
    "Sky (United Kingdom)": ["bskyb", "sky uk", "sky"],
    "Victoria (Australia)": ["victoria"],
    "Huguenot": ["huguenots", "huguenot"],
    "Steam engine": ["steam engines", "steam engine"],
    "1973 oil crisis": ["1973 oil crisis", "oil crisis", "embargo"],
    "Apollo program": ["apollo program", "apollo"],
    "European Union law": ["european union law", "eu law"],
    "Amazon rainforest": ["amazon rainforest", "amazon"],
    "Ctenophora": ["ctenophora", "ctenophores", "ctenophore"],
    "Fresno, California": ["fresno"],
    "Packet switching": ["packet switching"],
    "Black Death": ["black death", "plague"],
    "Newcastle upon Tyne": ["newcastle upon tyne", "newcastle"],
    "Victoria and Albert Museum": ["victoria and albert museum", "v&a", "museum"],
    "American Broadcasting Company": ["american broadcasting company", "abc"],
    "Genghis Khan": ["genghis khan", "temüjin", "genghis"],
    "Immune system": ["immune systems", "immune system"],
    "Civil disobedience": ["civil disobedience"],
    "Private school": ["private schools", "private school"],
    "Harvard University": ["harvard university", "harvard"],
    "Jacksonville, Florida": ["jacksonville"],
    "Economic inequality": ["economic inequality", "inequality"],
    "Doctor Who": ["doctor who"],
    "University of Chicago": ["university of chicago", "uchicago"],
    "Yuan dynasty": ["yuan dynasty", "yuan"],
    "Intergovernmental Panel on Climate Change": [
        "intergovernmental panel on climate change", "ipcc"],
    "Chloroplast": ["chloroplasts", "chloroplast"],
    "Prime number": ["prime numbers", "prime number", "primes"],
    "Scottish Parliament": ["scottish parliament", "parliament"],
    "United Methodist Church": ["united methodist church", "umc"],
    "French and Indian War": ["french and indian war"],
    "Computational complexity theory": ["computational complexity theory",
                                        "complexity theory"],
    "Teacher": ["teachers", "teacher"],
    "Normans": ["normans", "norman"],
}

PLURAL = {"Normans", "Huguenot", "Ctenophora", "Teacher", "Private school",
          "Chloroplast", "Prime number", "Steam engine"}
PREPOSITIONS = {"in", "at", "of", "for", "about", "on", "from", "to", "with", "by"}
PLACE_PREPOSITIONS = {"in", "at"}
# Words that may follow a topic a pronoun replaces (verbs, prepositions, conjunctions).
FOLLOWERS = PREPOSITIONS | {
    "is", "was", "are", "were", "be", "been", "has", "have", "had", "do", "does", "did",
    "can", "could", "will", "would", "should", "may", "might", "must", "and", "or", "but",
    "that", "which", "who", "when", "where", "first", "ever", "still", "also", "not",
    "become", "became", "begin", "began", "get", "got", "use", "uses", "make", "made",
    "take", "took", "win", "won", "play", "played", "start", "want", "need", "say",
    "said", "hold", "held", "consider", "receive", "lose", "lost", "during", "into",
    "over", "after", "before", "than", "as", "since", "under", "between", "against"}
ELLIPSIS_LEADS = ["and", "and what about", "how about", "what about"]


def aliases(title):
    names = ALIASES.get(title) or [title.lower()]
    return sorted(names, key=len, reverse=True)


def find_topic(question, title):
    """(start, end) of the topic's mention in `question` (with a leading "the" and a
    trailing "'s"), or None."""
    q = question.lower()
    for name in aliases(title):
        m = re.search(r"(?<![\w&])(the\s+)?" + re.escape(name) + r"(?:'s|s')?(?![\w&])", q)
        if m:
            return m.start(), m.end()
    return None


def rewrite(question, title, form):
    """The question with its topic mention replaced the way `form` says; None when the
    form does not fit the sentence."""
    span = find_topic(question, title)
    if span is None:
        return None
    start, end = span
    before, mention, after = question[:start], question[start:end], question[end:]
    nxt = re.match(r"\s*([\w&'-]+)", after)
    if nxt and not mention.endswith("'s") and not mention.endswith("s'"):
        # The mention as a modifier ("Apollo mission", "construction projects"): a
        # pronoun cannot stand there.
        w = nxt.group(1)
        if not (w.lower() in FOLLOWERS or re.search(r"(ed|es)$", w.lower())):
            return None
    plural = title in PLURAL
    possessive = mention.endswith("'s") or mention.endswith("s'")
    words_before = before.split()
    prev = words_before[-1].lower() if words_before else ""
    if form == "there":
        if prev not in PLACE_PREPOSITIONS or possessive:
            return None
        before = " ".join(words_before[:-1]) + " "
        new = before + "there" + after
    elif form == "that":
        if possessive or plural:
            return None
        new = before + "that" + after
    elif form == "ellipsis":
        # "What is the population of Warsaw?" -> "and the population?": the topic and its
        # preposition dropped, the question's head kept short.
        if prev not in PREPOSITIONS or possessive:
            return None
        head = " ".join(words_before[:-1])
        m = re.match(r"^(what|which|who|how many|how much)\s+(is|was|are|were)\s+(.+)$", head,
                     flags=re.I)
        if not m or len(m.group(3).split()) > 6:
            return None
        head = m.group(3)
        new = "{} {}{}".format(random.choice(ELLIPSIS_LEADS), head, after)
    else:  # pronoun
        if possessive:
            pron = "their" if plural else "its"
        elif plural:
            pron = "they" if prev in {"", "did", "do", "does", "were", "are", "have", "had",
                                       "can", "could", "would", "will", "when", "where",
                                       "why", "how", "what", "who"} else "them"
        else:
            pron = "it"
        new = before + pron + after
    new = re.sub(r"\s+", " ", new).strip()
    new = re.sub(r"\s+([?.,])", r"\1", new)
    if new.lower() == question.lower() or len(new.split()) < 2:
        return None
    return new[0].upper() + new[1:] if form != "ellipsis" else new


FORMS = ["pronoun", "pronoun", "there", "that", "ellipsis"]

# Off-topic questions a kiosk visitor asks that a Wikipedia-like corpus cannot answer.
OFF_TOPIC = [
    "What is the weather like today?",
    "Can you tell me a joke?",
    "What time is it?",
    "Where is the nearest bathroom?",
    "Who won the football game last night?",
    "What's your name?",
    "Is it going to rain tomorrow?",
    "How do I get to the train station?",
    "Can you play some music?",
    "What should I have for dinner?",
    "How are you doing today?",
    "Where did I park my car?",
    "Can you call a taxi for me?",
    "What is the wifi password?",
    "Do you sell gift cards?",
    "How old are you?",
    "Are you a robot?",
    "What's the best pizza place nearby?",
    "Can I pay by credit card?",
    "What day is it today?",
]


def drop_topic(question, title):
    """The question with its topic mention and the preposition before it dropped ("What
    is the population?"), or None when the topic is not after a preposition."""
    span = find_topic(question, title)
    if span is None:
        return None
    start, end = span
    before, mention, after = question[:start], question[start:end], question[end:]
    if mention.endswith("'s") or mention.endswith("s'"):
        return None
    words_before = before.split()
    if not words_before or words_before[-1].lower() not in PREPOSITIONS:
        return None
    new = " ".join(words_before[:-1]) + after
    new = re.sub(r"\s+", " ", new).strip()
    new = re.sub(r"\s+([?.,])", r"\1", new)
    if len(new.rstrip("?").split()) < 3 or new.lower() == question.lower():
        return None
    return new[0].upper() + new[1:]


def make(args):
    rng = random.Random(args.seed)
    random.seed(args.seed)
    titles = {}
    for p in dataset.records(args.corpus):
        titles[str(p["id"]).split("_")[0]] = p.get("title", "")
    qrels = load_qrels(args.qrels)
    by_article = defaultdict(list)
    for q in dataset.records(args.queries):
        rel = qrels.get(str(q["id"]))
        if not rel:
            continue
        art = sorted(rel)[0].split("_")[0]
        by_article[art].append(q)
    for qs in by_article.values():
        rng.shuffle(qs)
    used = set()
    arts = sorted(by_article, key=int)

    def take(art, follow_up):
        for q in by_article[art]:
            if q["id"] in used:
                continue
            if not follow_up:
                used.add(q["id"])
                return dict(id=q["id"], text=q["text"], full=q["text"], form="full")
            forms = FORMS[:]
            rng.shuffle(forms)
            if rng.random() < 0.5:  # the rarer forms first when they fit
                forms = ["ellipsis", "there"] + forms
            for form in forms:
                new = rewrite(q["text"], titles[art], form)
                if new:
                    used.add(q["id"])
                    return dict(id=q["id"], text=new, full=q["text"], form=form)
        return None

    if args.derail:
        return derail(args, rng, arts, take, titles, by_article, used)
    out = []
    for c in range(args.conversations):
        a, b = rng.sample(arts, 2)
        turns = []
        for art, lead in ((a, "first"), (b, "switch")):
            t = take(art, False)
            if t is None:
                break
            turns.append(dict(t, kind=lead, article=art))
            for _ in range(rng.choice([1, 1, 2])):
                f = take(art, True)
                if f:
                    turns.append(dict(f, kind="follow-up", article=art))
        if len(turns) < 2:
            continue
        for t in turns:
            t["conversation"] = f"c{c}"
            out.append(t)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for t in out:
            f.write(json.dumps({k: t[k] for k in ("id", "text", "conversation", "kind",
                                                    "form", "full", "article")}) + "\n")
    kinds = defaultdict(int)
    forms = defaultdict(int)
    for t in out:
        kinds[t["kind"]] += 1
        if t["kind"] == "follow-up":
            forms[t["form"]] += 1
    print(f"{args.out}: {len(out)} turns in {len({t['conversation'] for t in out})} "
          f"conversations; {dict(kinds)}; follow-up forms {dict(forms)}", file=sys.stderr)


def derail(args, rng, arts, take, titles, by_article, used):
    """The conversations of `make --derail` (the module's docstring)."""
    def cueless(art):
        for q in by_article[art]:
            if q["id"] in used:
                continue
            new = drop_topic(q["text"], titles[art])
            if new:
                used.add(q["id"])
                return dict(id=q["id"], text=new, full=q["text"], form="cue-less")
        return None

    def foreign(art):
        for q in by_article[art]:
            if q["id"] in used:
                continue
            new = rewrite(q["text"], titles[art], "pronoun")
            if new:
                used.add(q["id"])
                return dict(id=q["id"], text=new, full=q["text"], form="pronoun")
        return None

    out = []
    kinds = ["interjection", "repeat", "cue-less", "unanswerable", "agent-topic"]
    for c in range(args.conversations):
        what = kinds[c % len(kinds)]
        a, b = rng.sample(arts, 2)
        if what == "agent-topic":
            a, b = b, a  # the first question is about B, the follow-up about A
        first = take(a, False)
        if first is None:
            continue
        conv = [dict(first, kind="first", article=a)]
        if what == "interjection":
            f1, f2 = take(a, True), take(a, True)
            if not (f1 and f2):
                continue
            off = rng.choice(OFF_TOPIC)
            plain = conv + [dict(f1, kind="follow-up", article=a),
                            dict(f2, kind="no-interjection", article=a)]
            conv += [dict(f1, kind="follow-up", article=a),
                     dict(id="off", text=off, full=off, form="full", kind="interjection",
                          article=""),
                     dict(f2, kind="after-interjection", article=a)]
            convs = [(f"d{c}", conv), (f"d{c}-plain", plain)]
        elif what == "repeat":
            f = take(a, True)
            if not f:
                continue
            conv.append(dict(f, kind="follow-up", article=a))
            conv += [dict(f, kind="repeat", article=a) for _ in range(1 + (c // 4) % 5)]
            convs = [(f"d{c}", conv)]
        elif what == "cue-less":
            f = cueless(a)
            if not f:
                continue
            conv.append(dict(f, kind="cue-less", article=a))
            convs = [(f"d{c}", conv)]
        elif what == "agent-topic":
            f = take(b, True)
            if not f:
                continue
            conv.append(dict(f, kind="agent-topic", article=b, topic=titles[b]))
            convs = [(f"d{c}", conv)]
        else:
            f = foreign(b)
            if not f:
                continue
            conv.append(dict(f, kind="unanswerable", article=b))
            convs = [(f"d{c}", conv)]
        for name, ts in convs:
            for i, t in enumerate(ts):
                out.append(dict(t, qid=t["id"], id=f"{name}:{i}", conversation=name))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for t in out:
            f.write(json.dumps({k: t[k] for k in ("id", "qid", "text", "conversation", "kind",
                                                    "form", "full", "article", "topic")
                                if k in t}) + "\n")
    counts = defaultdict(int)
    for t in out:
        counts[t["kind"]] += 1
    print(f"{args.out}: {len(out)} turns in {len({t['conversation'] for t in out})} "
          f"conversations; {dict(counts)}", file=sys.stderr)


def search(args, lines, extra=()):
    primd = args.primd or os.path.join(ROOT, "target", "release", "primd")
    cmd = [primd, "search", "--index", args.index, "--k", "10", *extra]
    if args.model:
        cmd += ["--model", args.model]
    inp = "".join(json.dumps(x) + "\n" for x in lines).encode()
    out = subprocess.run(cmd, input=inp, capture_output=True, check=True).stdout
    return {str(r["id"]): [h["id"] for h in r["results"]] for r in map(json.loads,
                                                                        out.decode().splitlines())}


KINDS = ("first", "follow-up", "switch", "interjection", "after-interjection",
         "no-interjection", "repeat", "cue-less", "unanswerable", "agent-topic")


def table(turns, results, qrels):
    rows = {}
    for kind in KINDS:
        ts = [t for t in turns if t["kind"] == kind and qrels.get(t.get("qid", t["id"]))]
        h1 = h10 = mrr = 0.0
        for t in ts:
            rel = qrels.get(t.get("qid", t["id"]), set())
            ids = results.get(t["id"], [])
            rank = next((i + 1 for i, d in enumerate(ids[:10]) if d in rel), None)
            h1 += rank == 1
            h10 += rank is not None
            mrr += 1.0 / rank if rank else 0.0
        n = max(len(ts), 1)
        rows[kind] = (h1 / n, h10 / n, mrr / n, len(ts))
    return rows


def baselines(args):
    turns = list(dataset.records(args.conversations))
    qrels = load_qrels(args.qrels)
    runs = {}
    runs["alone"] = search(args, [{"id": t["id"], "text": t["text"]} for t in turns])
    runs["full"] = search(args, [{"id": t["id"], "text": t["full"] if t["kind"] != "interjection"
                                  else t["text"]} for t in turns])
    prev = {}
    lines = []
    for t in turns:
        p = prev.get(t["conversation"])
        lines.append({"id": t["id"], "text": (p + " " + t["text"]) if p else t["text"]})
        prev[t["conversation"]] = t["text"]
    runs["prepended"] = search(args, lines)
    if not args.no_context:
        runs["context"] = search(args, [dict({"id": t["id"], "text": t["text"],
                                              "conversation": t["conversation"]},
                                             **({"topic": t["topic"]} if "topic" in t else {}))
                                        for t in turns], args.extra)
    names = list(runs)
    tabs = {n: table(turns, runs[n], qrels) for n in names}
    print("| turn | n | " + " | ".join(names) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in names) + " |")
    for kind in KINDS:
        n = tabs[names[0]][kind][3]
        if not n:
            continue
        cells = [f"{tabs[x][kind][0]:.3f} / {tabs[x][kind][1]:.3f}" for x in names]
        print(f"| {kind} | {n} | " + " | ".join(cells) + " |")


def replay(args):
    """Finals through `primd run`: a socket session, or the pipe, per conversation."""
    import socket
    import tempfile
    import time
    turns = list(dataset.records(args.conversations))
    qrels = load_qrels(args.qrels)
    primd = args.primd or os.path.join(ROOT, "target", "release", "primd")
    base = [primd, "run", "--index", args.index, "--top-k", "10"]
    if args.model:
        base += ["--model", args.model]
    if args.no_context and args.via == "pipe":
        base += ["--no-context"]
    streams = {}
    if args.streams:
        if args.via != "socket":
            raise SystemExit("--streams: with --via socket")
        streams = {r["id"]: r for r in dataset.records(args.streams)}
        turns = [t for t in turns if t["id"] in streams]
    convs = defaultdict(list)
    for t in turns:
        convs[t["conversation"]].append(t)
    results = {}
    eou, embeds = [], []
    lows = defaultdict(list)
    if args.via == "pipe":
        for ts in convs.values():
            inp = "".join(json.dumps({"final": t["text"]}) + "\n" for t in ts).encode()
            out = subprocess.run(base + ["--input", "-"], input=inp, capture_output=True,
                                 check=True).stdout.decode().splitlines()
            if len(out) != len(ts):
                raise SystemExit(f"pipe: {len(ts)} turns, {len(out)} results")
            for t, line in zip(ts, out):
                results[t["id"]] = [h["id"] for h in json.loads(line)["results"]]
    else:
        path = os.path.join(tempfile.mkdtemp(), "primd.sock")
        daemon = subprocess.Popen(base + ["--listen", "unix:" + path, "--input", "none"],
                                  stdout=subprocess.DEVNULL)
        try:
            for _ in range(600):
                if os.path.exists(path):
                    break
                time.sleep(0.1)
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(path)
            reader = sock.makefile("r")
            for name, ts in convs.items():
                for i, t in enumerate(ts):
                    if "topic" in t and i > 0 and not args.no_context:
                        # The agent sets the topic (the session exists: a turn opened it).
                        sock.sendall((json.dumps({"cmd": "topic", "session": name,
                                                  "text": t["topic"]}) + "\n").encode())
                        while json.loads(reader.readline()).get("cmd") != "topic":
                            pass
                    rec = streams.get(t["id"])
                    msgs = [{"session": name, "turn": i, "partial": p["text"]}
                            for p in (rec["partials"] if rec else [])]
                    msgs.append({"session": name, "turn": i,
                                 "final": rec["final"] if rec else t["text"]})
                    for msg in msgs:
                        if args.no_context:
                            msg["context"] = False
                        sock.sendall((json.dumps(msg) + "\n").encode())
                    while True:
                        r = json.loads(reader.readline())
                        if r.get("type") == "final" and r.get("session") == name:
                            break
                        if r.get("type") == "error":
                            raise SystemExit(f"socket: {r}")
                    results[t["id"]] = [h["id"] for h in r["results"]]
                    lows[t["kind"]].append(r.get("evidence") == "low")
                    eou.append(r.get("ms", {}).get("eou_to_result"))
                    embeds.append(r.get("counts", {}).get("embeds"))
                sock.sendall((json.dumps({"cmd": "close", "session": name}) + "\n").encode())
        finally:
            daemon.terminate()
            daemon.wait()
    tab = table(turns, results, qrels)
    lat = sorted(x for x in eou if x is not None)
    if lat:
        emb = [x for x in embeds if x is not None]
        print(f"end of speech -> result: p50 {lat[len(lat) // 2]:.3f} ms, "
              f"p90 {lat[int(len(lat) * 0.9)]:.3f} ms over {len(lat)} turns; "
              f"embeds per turn {sum(emb) / max(len(emb), 1):.2f}")
    ctx = "alone" if args.no_context else "context"
    print(f"| turn | n | {args.via}, {ctx}: hit@1 / hit@10 / MRR@10 | low |")
    print("| --- | --- | --- | --- |")
    for kind in KINDS:
        h1, h10, mrr, n = tab[kind]
        low = lows.get(kind)
        if not n and not low:
            continue
        share = f"{sum(low) / len(low):.3f}" if low else "-"
        print(f"| {kind} | {n} | {h1:.3f} / {h10:.3f} / {mrr:.3f} | {share} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("make")
    dataset.add_arguments(m, ["corpus", "queries", "qrels"])
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=47)
    m.add_argument("--conversations", type=int, default=300)
    m.add_argument("--derail", action="store_true",
                   help="the conversations that derail (interjections, repeated finals, "
                   "cue-less and unanswerable follow-ups) instead")
    b = sub.add_parser("baselines")
    b.add_argument("--conversations", required=True)
    b.add_argument("--qrels", required=True)
    b.add_argument("--index", required=True)
    b.add_argument("--model")
    b.add_argument("--primd")
    b.add_argument("--no-context", action="store_true",
                   help="skip the run with primd's own conversation context")
    b.add_argument("extra", nargs="*", help="flags passed to the context run of primd search")
    r = sub.add_parser("replay")
    r.add_argument("--via", choices=["socket", "pipe"], required=True)
    r.add_argument("--conversations", required=True)
    r.add_argument("--qrels", required=True)
    r.add_argument("--index", required=True)
    r.add_argument("--model")
    r.add_argument("--primd")
    r.add_argument("--streams", help="recorded recognizer streams of the turns (tools/stt/"
                   "record.py): each turn is sent as its partials, then its final; turns "
                   "without one are left out")
    r.add_argument("--no-context", action="store_true",
                   help="every turn alone (\"context\": false on the socket, --no-context)")
    args = ap.parse_args()
    if args.what == "replay":
        replay(args)
    elif args.what == "make":
        dataset.resolve(m, args, ["corpus", "queries", "qrels"])
        make(args)
    else:
        baselines(args)


if __name__ == "__main__":
    main()
