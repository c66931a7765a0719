#!/usr/bin/env python3
"""Dialect equivalence check: every STT dialect must give the same answers as jsonl.

Renders the real recognizer streams (../shared/data/stt/spoken-squad-moonshine.jsonl,
150 utterances of Moonshine partials) into every input dialect primd reads, runs
`primd run --dialect X --pace 0` on each (and again with `--dialect auto`), and compares
each utterance's final transcript and top-10 passage ids with the `jsonl` run.
Prints a table; exits 1 on any difference (2 on a setup error).

Renderings (utterances laid end to end, GAP seconds of audio silence between them):
  plain              partial lines, the final as the last line, an empty line
  jsonl              {"partial", "t"} ... {"final", "t"}            (the reference)
  whisper-cpp        ESC[2K \\r redraws of each partial, the final committed by "\\n"
  whisper-cpp-vad    --step 0 blocks: START, one [t0 --> t1] segment (the final), END
  whisper-streaming  the final's words as committed increments "emit beg end text"
                     (the format carries no revisable partials)
  whisperlive        segment lists: the partial in progress, then the final completed,
                     older completed segments re-sent
  vosk               pretty-printed {"partial"} objects (with empty ones), {"text"}
  deepgram           interim Results per partial, the final is_final + speech_final

With streaming on (the default), the top-10 of an utterance depends on which partials
the retriever happened to look at (at --pace 0 it skips the ones that are superseded
while it embeds), so the jsonl stream is also run a second time as a control: that
row shows the run-to-run variation that is not the dialects' doing. `--no-streaming`
makes each answer a function of the final alone.

Usage:
  tools/check_dialects.py --index /work/scratch/idx/ss-180.idx [--limit N]
      [--primd target/debug/primd] [--model models] [--no-streaming] [--keep DIR]
      [--only whisper-cpp,vosk] [--no-auto]
Python standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_STT = os.path.join(ROOT, "..", "shared", "data", "stt", "spoken-squad-moonshine.jsonl")
GAP = 3.0  # seconds of silence between utterances (well over endpoint_ms)
CLR = "\x1b[2K\r" + " " * 100 + "\x1b[2K\r"  # what whisper.cpp's stream prints per step


def load(path, limit):
    utts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                utts.append(json.loads(line))
    return utts[:limit] if limit else utts


def laid_out(utts):
    """(offset seconds, utterance, its partials as (t, text)) per utterance. Empty
    partials are kept where the dialect has times: the recognizer really sent them, and
    they keep the audio clock going (no false silence gap)."""
    off = 0.0
    for u in utts:
        parts = [(p["t"], p["text"].strip()) for p in u["partials"]]
        yield off, u, parts
        off += u["audio_s"] + GAP


def nonempty(parts):
    return [(t, p) for t, p in parts if p]


def ts(s):
    ms = int(round(s * 1000))
    return "%02d:%02d:%02d.%03d" % (ms // 3600000, ms // 60000 % 60, ms // 1000 % 60, ms % 1000)


def r_jsonl(utts):
    out = []
    for off, u, parts in laid_out(utts):
        for t, p in parts:
            out.append(json.dumps({"partial": p, "t": round(off + t, 3)}))
        out.append(json.dumps({"final": u["final"], "t": round(off + u["audio_s"], 3)}))
    return "\n".join(out) + "\n"


def r_plain(utts):
    out = []
    for _, u, parts in laid_out(utts):
        out += [p for _, p in nonempty(parts)]
        out += [u["final"].strip(), ""]
    return "\n".join(out) + "\n"


def r_whisper_cpp(utts):
    s = "[Start speaking]\n"
    for _, u, parts in laid_out(utts):
        for _, p in nonempty(parts):
            s += CLR + " " + p
        s += CLR + " " + u["final"].strip() + "\n"
    return s


def r_whisper_cpp_vad(utts):
    s = "[Start speaking]\n"
    for n, (off, u, _) in enumerate(laid_out(utts)):
        t1 = int((off + u["audio_s"]) * 1000)
        s += "\n### Transcription %d START | t0 = %d ms | t1 = %d ms\n\n" % (n, int(off * 1000), t1)
        s += "[%s --> %s]   %s\n" % (ts(0), ts(u["audio_s"]), u["final"].strip())
        s += "\n### Transcription %d END\n" % n
    return s


def r_whisper_streaming(utts):
    out = []
    for off, u, _ in laid_out(utts):
        words = u["final"].split()
        n = len(words)
        for i in range(0, n, 2):  # commits of two words, spread over the audio
            beg = off + u["audio_s"] * i / n
            end = off + u["audio_s"] * min(i + 2, n) / n
            text = "".join(" " + w for w in words[i:i + 2])
            out.append("%1.4f %1.0f %1.0f %s" % (end * 1000 + 700, beg * 1000, end * 1000, text))
    return "\n".join(out) + "\n"


def r_whisperlive(utts):
    def seg(s, e, t, c):
        return {"start": "%.3f" % s, "end": "%.3f" % e, "text": " " + t, "completed": c}

    out = [json.dumps({"uid": "check", "message": "SERVER_READY", "backend": "faster_whisper"})]
    done = []  # completed segments, re-sent (the last 3) in every message
    for off, u, parts in laid_out(utts):
        for t, p in parts:
            out.append(json.dumps({"uid": "check", "segments": done[-3:] + [seg(off, off + t, p, False)]}))
        done.append(seg(off, off + u["audio_s"], u["final"].strip(), True))
        out.append(json.dumps({"uid": "check", "segments": done[-3:]}))
    return "\n".join(out) + "\n"


def r_vosk(utts):
    def pretty(o):
        return json.dumps(o, indent=2, separators=(",", " : "), ensure_ascii=False)

    out = []
    for _, u, parts in laid_out(utts):
        for _, p in parts:
            out += [pretty({"partial": ""}), pretty({"partial": p})]
        words = [{"conf": 1.0, "end": 0.0, "start": 0.0, "word": w} for w in u["final"].split()]
        out.append(pretty({"result": words, "text": u["final"]}))
    return "\n".join(out) + "\n"


def r_deepgram(utts):
    def results(text, start, dur, is_final, speech_final):
        return json.dumps({
            "type": "Results", "channel_index": [0, 1], "start": round(start, 3),
            "duration": round(dur, 3), "is_final": is_final, "speech_final": speech_final,
            "channel": {"alternatives": [{"transcript": text, "confidence": 0.9, "words": []}]},
        })

    out = [json.dumps({"type": "Metadata", "request_id": "check", "channels": 1})]
    for off, u, parts in laid_out(utts):
        out.append(json.dumps({"type": "SpeechStarted", "channel": [0], "timestamp": off}))
        for t, p in parts:
            out.append(results(p, off, t, False, False))
        out.append(results(u["final"], off, u["audio_s"], True, True))
    return "\n".join(out) + "\n"


RENDERINGS = [  # (row name, --dialect, renderer)
    ("jsonl", "jsonl", r_jsonl),
    ("plain", "plain", r_plain),
    ("whisper-cpp", "whisper-cpp", r_whisper_cpp),
    ("whisper-cpp-vad", "whisper-cpp", r_whisper_cpp_vad),
    ("whisper-streaming", "whisper-streaming", r_whisper_streaming),
    ("whisperlive", "whisperlive", r_whisperlive),
    ("vosk", "vosk", r_vosk),
    ("deepgram", "deepgram", r_deepgram),
]


def run(args, dialect, path):
    cmd = [args.primd, "run", "--model", args.model, "--index", args.index,
           "--dialect", dialect, "--pace", "0", "--input", path]
    if args.no_streaming:
        cmd.append("--no-streaming")
    p = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, RUST_LOG="primd=info"))
    if p.returncode != 0:
        sys.exit("error: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stderr[-3000:]))
    finals = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    finals = [f for f in finals if f.get("type") == "final"]
    detected = ""
    for line in p.stderr.splitlines():
        if "auto-detected" in line:
            detected = line.split("input dialect: ", 1)[-1].split(" ", 1)[0]
    return [(f["text"], [r["id"] for r in f["results"]][:10]) for f in finals], detected


def compare(ref, got):
    same_final = sum(1 for a, b in zip(ref, got) if a[0] == b[0])
    same_top = sum(1 for a, b in zip(ref, got) if a[1] == b[1])
    return same_final, same_top


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--stt", default=DEFAULT_STT)
    ap.add_argument("--model", default=os.path.join(ROOT, "models"))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ap.add_argument("--primd", default=os.path.join(target, "debug", "primd"))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--no-streaming", action="store_true")
    ap.add_argument("--no-auto", action="store_true", help="skip the --dialect auto runs")
    ap.add_argument("--only", default="", help="comma-separated rendering names")
    ap.add_argument("--keep", help="write the renderings into this directory")
    args = ap.parse_args()
    for f in (args.primd, args.index, args.stt):
        if not os.path.exists(f):
            print("error: %s not found" % f, file=sys.stderr)
            return 2
    utts = load(args.stt, args.limit)
    outdir = args.keep or tempfile.mkdtemp(prefix="primd-dialects-")
    os.makedirs(outdir, exist_ok=True)
    only = set(filter(None, args.only.split(",")))

    files = {}
    for name, dialect, render in RENDERINGS:
        path = os.path.join(outdir, name + ".txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(render(utts))
        files[name] = (dialect, path)

    ref, _ = run(args, "jsonl", files["jsonl"][1])
    rows = []
    control, _ = run(args, "jsonl", files["jsonl"][1])
    rows.append(("jsonl (2nd run)", "jsonl", "", control))
    for name, dialect, _ in RENDERINGS:
        if only and name not in only:
            continue
        path = files[name][1]
        if name != "jsonl":
            got, _ = run(args, dialect, path)
            rows.append((name, dialect, "", got))
        if not args.no_auto:
            got, detected = run(args, "auto", path)
            rows.append((name, "auto", detected, got))

    print("%d utterances; reference: jsonl; streaming %s; index %s" %
          (len(ref), "off" if args.no_streaming else "on", args.index))
    print()
    print("| rendering | --dialect | detected | utterances | identical finals | identical top-10 |")
    print("|---|---|---|---|---|---|")
    failed = len(ref) != len(utts)
    for name, dialect, detected, got in rows:
        same_final, same_top = compare(ref, got)
        n = len(got)
        print("| %s | %s | %s | %d | %d/%d | %d/%d |" %
              (name, dialect, detected or "", n, same_final, len(ref), same_top, len(ref)))
        ok = n == len(ref) and same_final == len(ref) and same_top == len(ref)
        if dialect == "auto" and detected != files[name][0]:
            ok = False
        failed |= not ok
    print()
    print("renderings in %s" % outdir)
    print("FAIL: differences above" if failed else "OK: every dialect matches jsonl")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
