#!/usr/bin/env python3
"""Streaming recognizer bridge: microphone or WAV -> a local recognizer -> partial and
final transcripts as `primd run` reads them.

    tools/stt/bridge.py [--wav FILE [--realtime]] [--engine moonshine|whisper]
        [--format jsonl|plain] [--chunk-ms 500] [--silence-ms 600] | primd run --index IDX

Audio is cut into 16 kHz mono chunks; while someone speaks (an energy VAD,
segment.py), the open utterance is re-transcribed every --chunk-ms of audio and each
new hypothesis printed as a partial; --silence-ms of silence ends it with a final.
jsonl lines carry `t`, the audio time in seconds since the start of the input.

With --wav the file is read as fast as the recognizer goes (every chunk transcribed);
with --realtime it arrives at the speed of speech, as from a microphone, and when the
recognizer falls behind it transcribes once for all the audio that came meanwhile (so
partials thin out instead of lagging). The microphone (`arecord`, the default input)
is always real time.

On stderr at the end: the real-time factor (recognizer busy time / audio time), the
partial cadence and what was heard; --stats FILE writes them as JSON. The first run
makes the venv and fetches the pinned weights (tools/stt/stt_venv.py, weights.py).
Exit status: 0 done (also when no speech was heard: it says so), 2 bad input (no
microphone, unreadable WAV), 1 the recognizer failed.
"""

import argparse
import json
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import stt_venv  # noqa: E402

from audio import RATE, AudioError, Microphone, chunks, read_wav  # noqa: E402
from emit import format_event  # noqa: E402
from segment import Segmenter  # noqa: E402

BLOCK_MS = 100  # how the audio source hands samples over


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--wav", metavar="FILE", help="a recording instead of the microphone")
    src.add_argument("--device", metavar="ALSA", help="arecord capture device (-D)")
    ap.add_argument("--realtime", action="store_true",
                    help="with --wav: feed the audio at the speed of speech, like a microphone")
    ap.add_argument("--no-convert", action="store_true",
                    help="with --wav: refuse a file that is not 16 kHz mono 16-bit instead of converting it")
    ap.add_argument("--engine", choices=("moonshine", "whisper"), default="moonshine")
    ap.add_argument("--format", choices=("jsonl", "plain"), default="jsonl")
    ap.add_argument("--chunk-ms", type=int, default=500, help="a partial every this much audio (default 500)")
    ap.add_argument("--silence-ms", type=int, default=600, help="silence that ends an utterance (default 600)")
    ap.add_argument("--max-s", type=float, default=20.0, help="longest utterance before a forced final (default 20)")
    ap.add_argument("--threads", type=int, default=0, help="recognizer threads (0: its default)")
    ap.add_argument("--stats", metavar="FILE", help="write the run's figures as JSON here")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ap.add_argument("--verbose", action="store_true", help="every partial on stderr too")
    ap.add_argument("--check", action="store_true",
                    help="only check the input (the WAV, or that a microphone is there) and exit")
    a = ap.parse_args(argv)
    if a.realtime and not a.wav:
        ap.error("--realtime is for --wav (the microphone is real time already)")
    if not 100 <= a.chunk_ms <= 5000:
        ap.error("--chunk-ms must be 100-5000")
    if not 90 <= a.silence_ms <= 10000:
        ap.error("--silence-ms must be 90-10000")
    return a


def say(msg):
    print(f"stt: {msg}", file=sys.stderr, flush=True)


def source_blocks(args, stop):
    """Blocks of BLOCK_MS samples from the WAV or the microphone (raises AudioError)."""
    n = RATE * BLOCK_MS // 1000
    if args.wav:
        samples, what = read_wav(args.wav, convert=not args.no_convert)
        if what != "16000 Hz, 1 channel(s), 16-bit":
            say(f"{args.wav}: {what}, converted to 16000 Hz mono 16-bit")
        start = time.monotonic()
        for i, block in enumerate(chunks(samples, n)):
            if stop.is_set():
                return
            if args.realtime:
                delay = start + i * BLOCK_MS / 1000 - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            yield block
        return
    mic = Microphone(args.device)
    try:
        while not stop.is_set():
            block = mic.read(n)
            if not block:
                return
            yield block
    finally:
        mic.close()


def reader(args, q, stop):
    try:
        for block in source_blocks(args, stop):
            q.put(block)
        q.put(None)
    except AudioError as e:
        q.put(e)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.wav:
        # Check the file before the (slow) model load, so bad input fails at once.
        try:
            read_wav(args.wav, convert=not args.no_convert)
        except AudioError as e:
            say(str(e))
            return 2
    elif not args.device:
        try:
            Microphone().close()
        except AudioError as e:
            say(str(e))
            return 2
    if args.check:
        return 0
    stt_venv.ensure()
    import engines
    t0 = time.perf_counter()
    try:
        engine = engines.load(args.engine, threads=args.threads)
    except Exception as e:  # a broken install or weights: say which
        say(f"could not load the {args.engine} recognizer: {e}")
        return 1
    load_s = time.perf_counter() - t0
    if not args.quiet:
        say(f"{args.engine} loaded in {load_s:.1f} s; listening to "
            f"{args.wav or 'the microphone'} (Ctrl-C ends)")
    seg = Segmenter(engine.transcribe, chunk_ms=args.chunk_ms, silence_ms=args.silence_ms,
                    max_s=args.max_s)
    live = bool(args.realtime or not args.wav)
    q = queue.Queue()
    stop = threading.Event()
    threading.Thread(target=reader, args=(args, q, stop), daemon=True).start()
    out = sys.stdout
    partial_wall, partial_audio, n_partials, n_finals = [], [], 0, 0
    status = 0

    def write(events):
        nonlocal n_partials, n_finals
        now = time.monotonic()
        for kind, t, text in events:
            out.write(format_event(args.format, kind, t, text))
            if kind == "partial":
                if args.verbose:
                    say(f"partial at {t:.2f} s: {text!r}")
                n_partials += 1
                partial_wall.append(now)
                partial_audio.append(t)
            else:
                n_finals += 1
                partial_wall.append(None)
                partial_audio.append(None)
                if not args.quiet:
                    say(f"final at {t:.2f} s: {text!r}")
        out.flush()

    try:
        done = False
        while not done:
            item = q.get()
            blocks = [item]
            while live and item is not None and not isinstance(item, Exception):
                try:  # behind real time: take all the audio that came meanwhile
                    item = q.get_nowait()
                    blocks.append(item)
                except queue.Empty:
                    break
            for b in blocks:
                if b is None:
                    done = True
                elif isinstance(b, AudioError):
                    say(str(b))
                    status, done = 2, True
            audio = [b for b in blocks if b is not None and not isinstance(b, Exception)]
            if audio:
                merged = audio[0]
                for b in audio[1:]:
                    merged.extend(b)
                write(seg.feed(merged))
        write(seg.flush())
    except KeyboardInterrupt:
        stop.set()
        write(seg.flush())
    except BrokenPipeError:
        stop.set()
        say("the reader of the transcripts (primd) closed its input; stopping")
        sys.stdout = None
        return 0
    audio_s = seg.pos / RATE
    stats = summary(args, engine, load_s, audio_s, partial_wall, partial_audio, n_partials, n_finals)
    if not args.quiet:
        say(f"{args.engine}: real-time factor {stats['rtf']:.3f} ({stats['busy_s']:.1f} s busy for "
            f"{audio_s:.1f} s of audio, {engine.calls} transcriptions); {n_partials} partials, "
            f"{n_finals} finals; partial cadence p50 {stats['partial_gap_audio_s_p50']} s of audio"
            + (f", {stats['partial_gap_wall_s_p50']} s wall" if live else ""))
    if not seg.heard_speech:
        say(f"no speech heard in {audio_s:.1f} s of audio (loudest 30 ms: "
            f"{seg.vad.peak_dbfs:.0f} dBFS); speak louder or nearer, or check the input")
    if args.stats:
        with open(args.stats, "w") as f:
            json.dump(stats, f, indent=1)
    return status


def p50(xs):
    xs = sorted(xs)
    return round(xs[len(xs) // 2], 3) if xs else None


def gaps(times):
    """Spacing of consecutive partials within an utterance (None marks a final)."""
    out, prev = [], None
    for t in times:
        if t is not None and prev is not None:
            out.append(t - prev)
        prev = t
    return out


def summary(args, engine, load_s, audio_s, wall, audio, n_partials, n_finals):
    return {
        "engine": args.engine, "chunk_ms": args.chunk_ms, "silence_ms": args.silence_ms,
        "input": args.wav or "microphone", "realtime": bool(args.realtime or not args.wav),
        "load_s": round(load_s, 3), "audio_s": round(audio_s, 3),
        "busy_s": round(engine.busy_s, 3), "transcribed_audio_s": round(engine.audio_s, 3),
        "calls": engine.calls,
        "rtf": round(engine.busy_s / audio_s, 4) if audio_s else None,
        "partials": n_partials, "finals": n_finals,
        "partial_gap_audio_s_p50": p50(gaps(audio)),
        "partial_gap_wall_s_p50": p50(gaps(wall)),
    }


if __name__ == "__main__":
    sys.exit(main())
