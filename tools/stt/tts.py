#!/usr/bin/env python3
"""Synthetic speech for tests and spoken data sets: espeak-ng (and sox for noise).

    tools/stt/tts.py --out DEMO.wav [--voice en-us] [--wpm 160] [--gap 2.0] < lines

reads one text per line (or a JSON object with "text" or "final") and writes them,
spoken one after another with --gap seconds of silence between, as one 16 kHz mono
WAV (what the end-to-end test feeds the bridge). Standard library plus the two
programs (Debian: apt-get install espeak-ng sox).
"""

import argparse
import array
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from audio import RATE, parse_wav, resample, to_mono, write_wav, _to_int16  # noqa: E402

# Voices of Debian's espeak-ng data that every install has (the +variants change the
# pitch and timbre: f3 a female-sounding variant).
VOICES = ("en-us", "en-gb", "en-us+f3", "en-gb-scotland")


class TtsError(Exception):
    pass


def need(program, package):
    if shutil.which(program) is None:
        raise TtsError(f"`{program}` is not installed (Debian: apt-get install {package})")


def speak(text, voice="en-us", wpm=160):
    """`text` spoken by espeak-ng, as 16 kHz mono int16 samples."""
    need("espeak-ng", "espeak-ng")
    r = subprocess.run(["espeak-ng", "-v", voice, "-s", str(wpm), "--stdout", text],
                       capture_output=True)
    if r.returncode != 0 or not r.stdout:
        raise TtsError(f"espeak-ng -v {voice} failed: {r.stderr.decode(errors='replace').strip()}")
    # espeak-ng --stdout streams a WAV whose sizes are unknown (0xFFFFFFFF): parse_wav
    # takes the data that is there.
    rate, channels, width, _, body = parse_wav(r.stdout)
    body = body[: len(body) // (width * channels) * width * channels]
    return resample(to_mono(_to_int16(body, width), channels), rate)


def add_noise(samples, snr_db, seed):
    """White-ish noise from sox's synth at `snr_db` below the speech's RMS level."""
    need("sox", "sox")
    if not samples:
        return samples
    rms = (sum(v * v for v in samples) / len(samples)) ** 0.5
    amp = min(0.9, rms / 32768 / (10 ** (snr_db / 20)) * 3 ** 0.5)  # uniform noise: rms = amp/sqrt(3)
    secs = len(samples) / RATE
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "n.wav")
        subprocess.run(["sox", "-n", "-r", str(RATE), "-c", "1", "-b", "16", path, "synth",
                        f"{secs:.3f}", "whitenoise", "vol", f"{amp:.5f}", "lowpass", "4000"],
                       check=True, capture_output=True, env={**os.environ, "SOX_OPTS": ""})
        with open(path, "rb") as f:
            _, _, _, _, body = parse_wav(f.read())
    noise = _to_int16(body, 2)
    rnd = random.Random(seed)
    shift = rnd.randrange(max(1, len(noise)))
    out = array.array("h", bytes(2 * len(samples)))
    for i, v in enumerate(samples):
        out[i] = max(-32768, min(32767, v + noise[(i + shift) % len(noise)]))
    return out


def silence(seconds):
    return array.array("h", bytes(2 * int(seconds * RATE)))


def text_of(line):
    line = line.strip()
    if line.startswith("{"):
        o = json.loads(line)
        return o.get("text") or o.get("final") or ""
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--voice", default="en-us")
    ap.add_argument("--wpm", type=int, default=160)
    ap.add_argument("--gap", type=float, default=2.0)
    ap.add_argument("--lead", type=float, default=0.5, help="silence before the first line")
    args = ap.parse_args()
    audio = silence(args.lead)
    n = 0
    try:
        for line in sys.stdin:
            text = text_of(line)
            if text:
                audio.extend(speak(text, args.voice, args.wpm))
                audio.extend(silence(args.gap))
                n += 1
    except TtsError as e:
        sys.exit(f"tts: {e}")
    write_wav(args.out, audio)
    print(f"tts: {n} lines, {len(audio) / RATE:.1f} s -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
