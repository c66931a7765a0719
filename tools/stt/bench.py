#!/usr/bin/env python3
"""Each recognizer's speed on this machine: one espeak-ng question (en-us, 160 wpm),
transcribed whole N times (median seconds per call and the real-time factor of one
call), then streamed as the bridge does (a re-transcription every --chunk-ms: the
real-time factor a live bridge needs to keep up, and its partials).

    tools/stt/bench.py [--engines moonshine,whisper] [--n 5] [--threads 1]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stt_venv  # noqa: E402
import tts  # noqa: E402
from audio import RATE  # noqa: E402
from record import record_one  # noqa: E402

TEXT = "I left my phone somewhere, you know. Where do I find lost property?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="moonshine,whisper")
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--chunk-ms", type=int, default=500)
    args = ap.parse_args()
    samples = tts.speak(TEXT, "en-us", 160)
    stt_venv.ensure()
    import engines
    secs = len(samples) / RATE
    print(f"{secs:.2f} s of speech; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name in args.engines.split(","):
        e = engines.load(name, threads=args.threads)
        e.transcribe(samples)
        times = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            e.transcribe(samples)
            times.append(time.perf_counter() - t0)
        one = statistics.median(times)
        busy0 = e.busy_s
        t0 = time.perf_counter()
        partials, final = record_one(e, samples, args.chunk_ms)
        streamed = e.busy_s - busy0
        print(f"{name}: one call {one:.3f} s median of {args.n} (real-time factor {one / secs:.3f}); "
              f"streamed in {args.chunk_ms} ms chunks: {len(partials)} partials, real-time factor "
              f"{streamed / secs:.2f}; final {final!r}; load average {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
