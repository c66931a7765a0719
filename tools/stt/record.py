#!/usr/bin/env python3
"""Make spoken data sets: typed questions -> espeak-ng speech -> a real recognizer,
streamed -> recognizer streams in the format of ../shared/data/stt.

    tools/stt/record.py QUERIES.jsonl OUT.jsonl [--engine moonshine|whisper]
        [--voices en-us,en-gb] [--wpm 160,190] [--snr-db 10] [--limit N]
        [--sample N --seed S] [--ids STREAMS.jsonl] [--chunk-ms 500]

QUERIES.jsonl: `{"id", "text"}` per line (Spoken-SQuAD's queries.jsonl), or the demo's
`{"final", "expected_id"}` lines (the id is then the line number). Each question is
spoken once per voice x speed (x noise, with --snr-db: sox's white noise that many dB
under the speech), streamed through the bridge's segmenter and recognizer in --chunk-ms
chunks (each chunk re-transcribes the utterance so far, as the bridge does live), and
written as one line:

    {"id", "text", "audio_s", "partials": [{"t", "text"}...], "final",
     "voice", "wpm", "snr_db", "engine", "busy_s"}

where `t` is audio seconds since the utterance began and the final is at `audio_s`
(the end of the audio): the format `primd eval --streams`, tools/bench/replay.py and
tools/replay/stt_replay.py read. OUT.jsonl is appended to, and utterances it already
holds are skipped, so an interrupted run resumes. Run it niced: it keeps a core busy.
"""

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import stt_venv  # noqa: E402
from audio import RATE  # noqa: E402
from segment import Segmenter  # noqa: E402
import tts  # noqa: E402


def load_queries(path):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                o = json.loads(line)
                text = o.get("text") or o.get("final")
                if text:
                    out.append((str(o.get("id", n)), text))
    return out


def record_one(engine, samples, chunk_ms):
    """Stream one utterance's audio through the segmenter: its partials and final."""
    # One question is one utterance: the VAD only finds where speech starts (no
    # partial before it); the end of the audio is the end of the utterance.
    seg = Segmenter(engine.transcribe, chunk_ms=chunk_ms, silence_ms=10000, max_s=60)
    events = []
    block = RATE // 10
    for i in range(0, len(samples), block):
        events += seg.feed(samples[i:i + block])
    events += seg.flush()
    partials = [{"t": t, "text": text} for kind, t, text in events if kind == "partial"]
    finals = [text for kind, _, text in events if kind == "final"]
    return partials, " ".join(finals)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("queries")
    ap.add_argument("out")
    ap.add_argument("--engine", choices=("moonshine", "whisper"), default="moonshine")
    ap.add_argument("--voices", default="en-us", help=f"comma-separated espeak-ng voices (e.g. {','.join(tts.VOICES)})")
    ap.add_argument("--wpm", default="160", help="comma-separated speaking rates, words per minute")
    ap.add_argument("--snr-db", type=float, default=None, help="add noise this many dB under the speech")
    ap.add_argument("--ids", metavar="STREAMS", help="only the questions whose ids this jsonl file holds")
    ap.add_argument("--exclude", metavar="STREAMS", help="leave out the ids this jsonl file holds")
    ap.add_argument("--sample", type=int, default=None, help="a random sample of N questions")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions")
    ap.add_argument("--chunk-ms", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    queries = load_queries(args.queries)

    def ids_of(path):
        with open(path) as f:
            return {str(json.loads(line)["id"]) for line in f if line.strip()}
    if args.ids:
        keep = ids_of(args.ids)
        queries = [q for q in queries if q[0] in keep]
    if args.exclude:
        drop = ids_of(args.exclude)
        queries = [q for q in queries if q[0] not in drop]
    if args.sample is not None:
        queries = random.Random(args.seed).sample(queries, min(args.sample, len(queries)))
    if args.limit is not None:
        queries = queries[: args.limit]
    voices = [v for v in args.voices.split(",") if v]
    rates = [int(w) for w in args.wpm.split(",") if w]
    for prog, pkg in (("espeak-ng", "espeak-ng"),) + ((("sox", "sox"),) if args.snr_db is not None else ()):
        try:
            tts.need(prog, pkg)
        except tts.TtsError as e:
            sys.exit(f"record: {e}")
    stt_venv.ensure()
    import engines
    done = set()
    if os.path.exists(args.out):
        with open(args.out) as f:
            for line in f:
                if line.strip():
                    o = json.loads(line)
                    done.add((o["id"], o["voice"], o["wpm"], o.get("snr_db"), o["engine"]))
    engine = engines.load(args.engine, threads=args.threads)
    todo = [(qid, text, v, w) for qid, text in queries for v in voices for w in rates
            if (qid, v, w, args.snr_db, args.engine) not in done]
    print(f"record: {len(todo)} utterances to make ({len(queries)} questions x {len(voices)} voices "
          f"x {len(rates)} rates, {len(queries) * len(voices) * len(rates) - len(todo)} already in {args.out})",
          file=sys.stderr, flush=True)
    start, audio_total = time.time(), 0.0
    with open(args.out, "a") as out:
        for n, (qid, text, voice, wpm) in enumerate(todo, 1):
            samples = tts.speak(text, voice, wpm)
            if args.snr_db is not None:
                samples = tts.add_noise(samples, args.snr_db, seed=hash((qid, voice, wpm)) & 0xFFFF)
            busy0 = engine.busy_s
            partials, final = record_one(engine, samples, args.chunk_ms)
            audio_s = round(len(samples) / RATE, 3)
            audio_total += audio_s
            out.write(json.dumps({
                "id": qid, "text": text, "audio_s": audio_s, "partials": partials, "final": final,
                "voice": voice, "wpm": wpm, "snr_db": args.snr_db, "engine": args.engine,
                "busy_s": round(engine.busy_s - busy0, 3)}, ensure_ascii=False) + "\n")
            out.flush()
            if n % 10 == 0 or n == len(todo):
                el = time.time() - start
                print(f"record: {n}/{len(todo)} in {el:.0f} s ({audio_total:.0f} s of speech; "
                      f"recognizer real-time factor {engine.busy_s / max(audio_total, 1e-9):.2f})",
                      file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
