"""Audio in for the recognizer bridge: WAV files checked and converted, the microphone
through `arecord`, both cut into 16 kHz mono 16-bit chunks.

Standard library only (no numpy), so that its checks are unit-tested without the
recognizer's venv. Samples travel as `array("h")` of 16-bit mono samples at RATE.
"""

import array
import os
import shutil
import struct
import subprocess
import sys
import wave

RATE = 16000


class AudioError(Exception):
    """Audio the bridge cannot use, with a message a user can act on."""


def _to_int16(raw, width):
    """Little-endian PCM of 1-4 bytes per sample -> array('h')."""
    if width == 2:
        out = array.array("h")
        out.frombytes(raw[: len(raw) // 2 * 2])
        if sys.byteorder == "big":
            out.byteswap()
        return out
    if width == 1:  # unsigned 8-bit
        return array.array("h", ((b - 128) << 8 for b in raw))
    if width in (3, 4):
        n = len(raw) // width
        return array.array("h", (
            int.from_bytes(raw[i * width:(i + 1) * width], "little", signed=True) >> (8 * (width - 2))
            for i in range(n)))
    raise AudioError(f"{width * 8}-bit samples are not PCM the bridge reads (8, 16, 24 or 32-bit)")


def to_mono(samples, channels):
    """Interleaved samples of `channels` channels -> their mean, one channel."""
    if channels == 1:
        return samples
    n = len(samples) // channels
    return array.array("h", (
        sum(samples[i * channels:(i + 1) * channels]) // channels for i in range(n)))


def resample(samples, src_rate, dst_rate=RATE):
    """Linear-interpolation resampling; speech survives it well enough for a recognizer
    (an averaging pre-filter keeps the worst aliasing out when going down)."""
    if src_rate == dst_rate or not samples:
        return samples
    if src_rate > dst_rate:
        k = max(1, round(src_rate / dst_rate / 2))  # box filter width ~ half the ratio
        if k > 1:
            s = samples
            acc = [0] * (len(s) + 1)
            for i, v in enumerate(s):
                acc[i + 1] = acc[i] + v
            samples = array.array("h", (
                (acc[min(len(s), i + k)] - acc[i]) // (min(len(s), i + k) - i) for i in range(len(s))))
    n_out = int(len(samples) * dst_rate / src_rate)
    out = array.array("h", bytes(2 * n_out))
    step = src_rate / dst_rate
    last = len(samples) - 1
    for j in range(n_out):
        x = j * step
        i = int(x)
        if i >= last:
            out[j] = samples[last]
        else:
            f = x - i
            out[j] = int(samples[i] + (samples[i + 1] - samples[i]) * f)
    return out


def parse_wav(data):
    """(rate, channels, bytes per sample, float?, sample bytes) of a RIFF WAV: PCM
    integer 8-32 bit or float32, plain or WAVE_FORMAT_EXTENSIBLE (what sox writes)."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioError("not a WAV file (no RIFF/WAVE header)")
    pos, fmt, body = 12, None, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        chunk = data[pos + 8:pos + 8 + size]
        if cid == b"fmt ":
            fmt = chunk
        elif cid == b"data":
            body = chunk  # a streamed WAV may claim more than is there: take what is
            break
        pos += 8 + size + (size & 1)
    if fmt is None or len(fmt) < 16 or body is None:
        raise AudioError("a WAV file without its fmt or data chunk")
    tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", fmt[:16])
    if tag == 0xFFFE and len(fmt) >= 26:
        tag = struct.unpack("<H", fmt[24:26])[0]  # the sub-format GUID starts with it
    if tag not in (1, 3) or (tag == 3 and bits != 32) or bits not in (8, 16, 24, 32):
        raise AudioError(f"WAV format {tag} with {bits}-bit samples: the bridge reads PCM "
                         f"(8-32 bit integer, or 32-bit float)")
    if channels < 1 or rate < 1:
        raise AudioError(f"a WAV file with {channels} channels at {rate} Hz")
    return rate, channels, bits // 8, tag == 3, body


def read_wav(path, convert=True):
    """A WAV file as 16 kHz mono int16 samples, and what the file was. Another rate,
    channel count or sample format is converted when `convert`, else refused, saying
    what the file is."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise AudioError(f"{path}: {e.strerror}") from None
    try:
        rate, channels, width, is_float, body = parse_wav(data)
    except AudioError as e:
        raise AudioError(f"{path}: {e}; convert it first, e.g. "
                         f"`sox IN -r 16000 -c 1 -b 16 OUT.wav`") from None
    what = f"{rate} Hz, {channels} channel(s), {width * 8}-bit{' float' if is_float else ''}"
    if (rate, channels, width, is_float) != (RATE, 1, 2, False) and not convert:
        raise AudioError(f"{path}: {what}; the recognizers take 16000 Hz mono 16-bit "
                         f"(drop --no-convert to convert it, or `sox {path} -r 16000 -c 1 -b 16 OUT.wav`)")
    if rate < 8000:
        raise AudioError(f"{path}: {what}: a rate under 8000 Hz holds too little of speech to recognise")
    body = body[: len(body) // (width * channels) * width * channels]
    if is_float:
        f32 = array.array("f")
        f32.frombytes(body)
        if sys.byteorder == "big":
            f32.byteswap()
        samples = array.array("h", (max(-32768, min(32767, int(v * 32768))) for v in f32))
    else:
        samples = _to_int16(body, width)
    return resample(to_mono(samples, channels), rate), what


def chunks(samples, chunk_samples):
    """Successive slices of `chunk_samples` (the last one may be shorter)."""
    for i in range(0, len(samples), chunk_samples):
        yield samples[i:i + chunk_samples]


class Microphone:
    """The default ALSA capture device through `arecord`, 16 kHz mono 16-bit raw."""

    def __init__(self, device=None):
        if shutil.which("arecord") is None:
            raise AudioError("no microphone: `arecord` is not installed (Debian: apt-get install "
                             "alsa-utils); or give a recording with --wav FILE")
        listed = subprocess.run(["arecord", "-l"], capture_output=True, text=True)
        if device is None and "card" not in listed.stdout:
            detail = (listed.stderr.strip().splitlines() or ["no capture device listed"])[-1]
            raise AudioError(f"no microphone: arecord finds no capture device ({detail}); "
                             f"or give a recording with --wav FILE")
        cmd = ["arecord", "-q", "-f", "S16_LE", "-c", "1", "-r", str(RATE), "-t", "raw"]
        if device:
            cmd += ["-D", device]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read(self, n_samples):
        """Up to n_samples samples; an empty array when the device closed."""
        raw = self.proc.stdout.read(2 * n_samples)
        if not raw and self.proc.poll() not in (None, 0):
            err = self.proc.stderr.read().decode(errors="replace").strip()
            raise AudioError(f"the microphone stopped: arecord exited with {self.proc.returncode}"
                             + (f": {err}" if err else ""))
        return _to_int16(raw, 2)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


def write_wav(path, samples, rate=RATE):
    """16-bit mono WAV."""
    tmp = path + ".tmp" if path != "-" else path
    with wave.open(tmp, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        data = samples
        if sys.byteorder == "big":
            data = array.array("h", samples)
            data.byteswap()
        w.writeframes(data.tobytes())
    if tmp != path:
        os.replace(tmp, path)
