#!/usr/bin/env python3
"""Replay recorded recognizer output as primd's "jsonl" partial-transcript dialect.

Input: the real-recognizer recordings in ../shared/data/stt/spoken-squad-moonshine.jsonl
(next to the project checkout)
(see the README next to it), one utterance per line:
    {"id", "text", "audio_s", "partials": [{"t", "text"}, ...], "final"}
where each partial's "t" is audio seconds since the start of that utterance ("audio_s"
may be left out: the utterance then ends at its last partial, as in `primd eval`).

Output: one JSON object per line, utterances laid end to end with --gap seconds of
silence between them; per utterance, its partials then its final:
    {"partial": text, "t": offset + local_t, "id": utterance id}
    ...
    {"final": final, "t": offset + audio_s, "id": utterance id}
A partial is cumulative (the whole hypothesis so far), as the recognizer printed it.
Partials whose text is empty or only whitespace are kept: real recognizers emit them,
and the daemon must cope. Times are rounded to the millisecond; they never decrease
(the last partial of an utterance is usually at audio_s, the same time as its final).

Usage:
    tools/replay/stt_replay.py --limit 3                    # print to stdout at once
    tools/replay/stt_replay.py --output /tmp/stream.jsonl   # whole file
    tools/replay/stt_replay.py --realtime --speed 2 | primd run ...
                                      # live: each line at its audio time / speed

Options:
    --input FILE   recordings (default: the shared spoken-squad-moonshine.jsonl)
    --limit N      only the first N utterances
    --gap S        silence between utterances, seconds (default 1.5)
    --realtime     sleep so each line comes out at its audio time, flushing each line
    --speed X      with --realtime: play X times faster than real time (default 1)
    --output FILE  write here instead of stdout

Python 3 standard library only. A closed output pipe (the reader exited) ends the
replay quietly with status 0.
"""

import argparse
import json
import os
import sys
import time

DEFAULT_INPUT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "shared", "data", "stt", "spoken-squad-moonshine.jsonl")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Replay recorded STT partials as primd's jsonl dialect.",
        epilog="See the module docstring for the output format.",
    )
    ap.add_argument("--input", default=DEFAULT_INPUT, metavar="FILE",
                    help="recordings, one utterance per line (default: %(default)s)")
    ap.add_argument("--limit", type=int, default=None, metavar="N",
                    help="only the first N utterances")
    ap.add_argument("--gap", type=float, default=1.5, metavar="S",
                    help="seconds of silence between utterances (default: %(default)s)")
    ap.add_argument("--final-delay", type=float, default=0.0, metavar="S",
                    help="seconds between the end of the audio and the final (a recognizer "
                         "declares a final only after its endpointing silence; the recordings "
                         "stamp it at the end of the audio) (default: %(default)s)")
    ap.add_argument("--realtime", action="store_true",
                    help="emit each line at its audio time (scaled by --speed), flushed")
    ap.add_argument("--speed", type=float, default=1.0, metavar="X",
                    help="with --realtime: speed-up factor (default: %(default)s)")
    ap.add_argument("--output", default=None, metavar="FILE",
                    help="output file (default: stdout)")
    args = ap.parse_args(argv)
    if not 0 <= args.final_delay < args.gap:
        ap.error("--final-delay must be at least 0 and less than --gap")
    if args.limit is not None and args.limit < 0:
        ap.error("--limit must be >= 0")
    if not args.gap >= 0:
        ap.error("--gap must be >= 0")
    if not args.speed > 0:
        ap.error("--speed must be > 0")
    return args


def read_utterances(path, limit):
    """Yields checked utterance dicts; a malformed line is an error naming its line."""
    count = 0
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if limit is not None and count >= limit:
                return
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                u = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: not JSON: {e}") from None
            if not isinstance(u, dict):
                raise ValueError(f"{where}: expected a JSON object")
            for key, kind in (("id", str), ("partials", list), ("final", str)):
                if not isinstance(u.get(key), kind):
                    raise ValueError(f"{where}: missing or bad {key!r}")
            # Optional, as in `primd eval`: without it the utterance ends at its last partial.
            audio_s = u.get("audio_s")
            if audio_s is not None and (not isinstance(audio_s, (int, float))
                                        or isinstance(audio_s, bool)):
                raise ValueError(f"{where}: bad 'audio_s'")
            for p in u["partials"]:
                if (not isinstance(p, dict) or not isinstance(p.get("text"), str)
                        or not isinstance(p.get("t"), (int, float))):
                    raise ValueError(f"{where}: bad partial {p!r}")
            count += 1
            yield u


def events(utterances, gap, final_delay=0.0):
    """Yields (global_t, event dict) in output order, t never decreasing."""
    offset = 0.0
    last_t = 0.0
    for u in utterances:
        uid = u["id"]
        last = max((float(p["t"]) for p in u["partials"]), default=0.0)
        end = max(float(u["audio_s"]), last) if u.get("audio_s") is not None else last
        for p in u["partials"]:
            # Clamp so a recording with a stray out-of-order or late time still gives a
            # non-decreasing stream that stays inside its utterance.
            local = min(max(float(p["t"]), 0.0), end)
            t = max(round(offset + local, 3), last_t)
            last_t = t
            yield t, {"partial": p["text"], "t": t, "id": uid}
        t = max(round(offset + end + final_delay, 3), last_t)
        last_t = t
        yield t, {"final": u["final"], "t": t, "id": uid}
        offset = offset + end + gap


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        out = sys.stdout if args.output is None else open(args.output, "w", encoding="utf-8")
    except OSError as e:
        print(f"stt_replay: {e}", file=sys.stderr)
        return 1
    try:
        start = time.monotonic()
        for t, ev in events(read_utterances(args.input, args.limit), args.gap, args.final_delay):
            if args.realtime:
                delay = start + t / args.speed - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            out.write(json.dumps(ev, ensure_ascii=False) + "\n")
            if args.realtime:
                out.flush()
        out.flush()
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, and keep Python from
        # complaining again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError) as e:
        print(f"stt_replay: {e}", file=sys.stderr)
        return 1
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
