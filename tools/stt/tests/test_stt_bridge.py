"""The recognizer bridge's parts that need no model: the energy VAD, the segmenter's
partial/final schedule, the output lines primd reads, WAV checks and conversion, and
the bridge's refusals of bad input (no microphone, unreadable or wrong WAV), which
happen before any venv or model is touched. Standard library only."""

import array
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

STT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, STT)

from audio import AudioError, parse_wav, read_wav, resample, to_mono, write_wav  # noqa: E402
from emit import format_event  # noqa: E402
from segment import EnergyVad, Segmenter, level_dbfs  # noqa: E402

RATE = 16000


def tone(seconds, amp=8000, freq=220, rate=RATE):
    return array.array("h", (int(amp * math.sin(2 * math.pi * freq * i / rate))
                             for i in range(int(seconds * rate))))


def quiet(seconds, amp=0, seed=1):
    if amp == 0:
        return array.array("h", bytes(2 * int(seconds * RATE)))
    x, out = seed, array.array("h")
    for _ in range(int(seconds * RATE)):  # a small LCG: deterministic noise
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append((x % (2 * amp + 1)) - amp)
    return out


def feed_all(seg, samples, block=1600):
    events = []
    for i in range(0, len(samples), block):
        events += seg.feed(samples[i:i + block])
    return events + seg.flush()


class FakeEngine:
    """Says how much audio it was given, so a test sees which audio each event is of."""

    def __init__(self):
        self.calls = []

    def __call__(self, samples):
        self.calls.append(len(samples))
        return f"heard {len(samples) // 1600} tenths"


class VadTest(unittest.TestCase):
    def test_levels(self):
        self.assertEqual(level_dbfs(quiet(0.03)), -100.0)
        self.assertAlmostEqual(level_dbfs(tone(0.03, amp=32767 // 2)), -9.0, delta=0.5)

    def events(self, audio, **kw):
        vad, out = EnergyVad(**kw), []
        for i in range(0, len(audio) - 479, 480):
            change = vad.push(audio[i:i + 480])
            if change:
                out.append((change, round((i + 480) / RATE, 2)))
        return out

    def test_speech_between_silences_starts_and_ends_once(self):
        audio = quiet(1) + tone(2) + quiet(2)
        ev = self.events(audio, silence_ms=600)
        self.assertEqual([e for e, _ in ev], ["start", "end"])
        self.assertAlmostEqual(ev[0][1], 1.09, delta=0.05)  # 90 ms of voice to start
        self.assertAlmostEqual(ev[1][1], 3.6, delta=0.05)  # 600 ms of silence to end

    def test_short_pause_does_not_end_speech(self):
        ev = self.events(quiet(1) + tone(1) + quiet(0.3) + tone(1) + quiet(1), silence_ms=600)
        self.assertEqual([e for e, _ in ev], ["start", "end"])

    def test_steady_noise_is_not_speech_but_louder_voice_over_it_is(self):
        noise = quiet(3, amp=2000)  # about -27 dBFS: over the -50 dBFS floor
        self.assertEqual(self.events(noise), [])
        speech = tone(1.5, amp=20000)
        mixed = noise + array.array("h", (max(-32768, min(32767, a + b))
                                          for a, b in zip(speech, quiet(1.5, amp=2000, seed=3)))) + quiet(2, amp=2000, seed=5)
        self.assertEqual([e for e, _ in self.events(mixed)], ["start", "end"])

    def test_a_steady_hum_becomes_noise_after_the_floor_window(self):
        ev = self.events(quiet(0.5) + tone(8) + quiet(1), floor_s=5)
        self.assertEqual([e for e, _ in ev], ["start", "end"])
        self.assertLess(ev[1][1], 6.5)  # 5 s of the same level: the floor has risen to it

    def test_silence_only_and_a_click_are_not_speech(self):
        self.assertEqual(self.events(quiet(5)), [])
        self.assertEqual(self.events(quiet(1) + tone(0.03) + quiet(1)), [])


class SegmenterTest(unittest.TestCase):
    def test_partials_every_chunk_then_a_final_at_silence(self):
        eng = FakeEngine()
        seg = Segmenter(eng, chunk_ms=500, silence_ms=600)
        ev = feed_all(seg, quiet(1) + tone(2) + quiet(2))
        kinds = [k for k, _, _ in ev]
        self.assertEqual(kinds[-1], "final")
        self.assertEqual(kinds.count("final"), 1)
        ts = [t for k, t, _ in ev if k == "partial"]
        self.assertGreaterEqual(len(ts), 4)
        for a, b in zip(ts, ts[1:]):
            self.assertAlmostEqual(b - a, 0.5, delta=0.01)
        final_t = ev[-1][1]
        self.assertAlmostEqual(final_t, 3.6, delta=0.05)
        # Each partial re-transcribed the whole open utterance: growing audio.
        self.assertEqual(eng.calls, sorted(eng.calls))
        self.assertTrue(all(t <= final_t for _, t, _ in ev))

    def test_two_utterances_two_finals_and_times_never_decrease(self):
        seg = Segmenter(FakeEngine(), chunk_ms=300, silence_ms=500)
        ev = feed_all(seg, quiet(0.5) + tone(1) + quiet(1.5) + tone(1.2) + quiet(1.5))
        self.assertEqual([k for k, _, _ in ev].count("final"), 2)
        ts = [t for _, t, _ in ev]
        self.assertEqual(ts, sorted(ts))

    def test_silence_only_gives_nothing(self):
        eng = FakeEngine()
        seg = Segmenter(eng)
        self.assertEqual(feed_all(seg, quiet(5)), [])
        self.assertEqual(eng.calls, [])
        self.assertFalse(seg.heard_speech)

    def test_unchanged_or_empty_hypotheses_are_not_repeated(self):
        seg = Segmenter(lambda s: "same words", chunk_ms=200)
        ev = feed_all(seg, quiet(0.5) + tone(2) + quiet(1))
        self.assertEqual([k for k, _, _ in ev], ["partial", "final"])
        seg = Segmenter(lambda s: "  ", chunk_ms=200)
        self.assertEqual(feed_all(seg, quiet(0.5) + tone(2) + quiet(1)), [])

    def test_input_ending_mid_utterance_gives_its_final(self):
        seg = Segmenter(FakeEngine())
        ev = feed_all(seg, quiet(0.5) + tone(1.5))
        self.assertEqual(ev[-1][0], "final")
        self.assertAlmostEqual(ev[-1][1], 2.0, delta=0.01)

    def test_a_long_utterance_is_cut_at_max_s(self):
        seg = Segmenter(FakeEngine(), max_s=3)
        syllables = array.array("h")
        for _ in range(25):  # 7.5 s of 200 ms syllables and 100 ms gaps, no pause to end at
            syllables += tone(0.2) + quiet(0.1)
        ev = feed_all(seg, quiet(0.5) + syllables)
        self.assertGreaterEqual([k for k, _, _ in ev].count("final"), 2)

    def test_a_large_block_is_transcribed_once(self):
        # Behind real time, the bridge feeds all the audio that came meanwhile at once.
        eng = FakeEngine()
        seg = Segmenter(eng, chunk_ms=500)
        seg.feed(quiet(0.5))
        ev = seg.feed(tone(3))
        self.assertEqual(len(eng.calls), 1)
        self.assertEqual([k for k, _, _ in ev], ["partial"])

    def test_whitespace_and_newlines_are_collapsed(self):
        seg = Segmenter(lambda s: " what \n time\tdoes ", chunk_ms=200)
        ev = feed_all(seg, quiet(0.5) + tone(1) + quiet(1))
        self.assertEqual(ev[0][2], "what time does")


class EmitTest(unittest.TestCase):
    def test_jsonl_lines_are_what_primd_reads(self):
        line = format_event("jsonl", "partial", 1.23456, "what time")
        self.assertTrue(line.endswith("\n"))
        self.assertEqual(json.loads(line), {"partial": "what time", "t": 1.235})
        self.assertEqual(json.loads(format_event("jsonl", "final", 2, "Café?")),
                         {"final": "Café?", "t": 2})

    def test_plain_ends_an_utterance_with_an_empty_line(self):
        self.assertEqual(format_event("plain", "partial", 1, "what"), "what\n")
        self.assertEqual(format_event("plain", "final", 2, "what time"), "what time\n\n")
        self.assertEqual(format_event("plain", "final", 2, ""), "\n")
        with self.assertRaises(ValueError):
            format_event("xml", "final", 2, "x")


def wav_bytes(samples_bytes, rate, channels, bits, tag=1, extensible=False):
    block = channels * bits // 8
    if extensible:
        fmt = struct.pack("<HHIIHHHHI16s", 0xFFFE, channels, rate, rate * block, block, bits, 22,
                          bits, 0, struct.pack("<H", tag) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71")
    else:
        fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)
    body = b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(samples_bytes)) + samples_bytes
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WAVE" + body


class WavTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name, data):
        p = os.path.join(self.dir.name, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def test_16k_mono_round_trips(self):
        s = tone(0.5)
        p = os.path.join(self.dir.name, "a.wav")
        write_wav(p, s)
        got, what = read_wav(p, convert=False)
        self.assertEqual(what, "16000 Hz, 1 channel(s), 16-bit")
        self.assertEqual(got, s)

    def test_stereo_44k_is_converted_keeping_length_and_pitch(self):
        s = tone(1.0, freq=440, rate=44100)
        stereo = array.array("h")
        for v in s:
            stereo.extend((v, v // 2))
        p = self.path("b.wav", wav_bytes(stereo.tobytes(), 44100, 2, 16))
        got, what = read_wav(p)
        self.assertIn("44100 Hz, 2 channel(s)", what)
        self.assertAlmostEqual(len(got), 16000, delta=2)
        crossings = sum(1 for a, b in zip(got, got[1:]) if a < 0 <= b)
        self.assertAlmostEqual(crossings, 440, delta=3)

    def test_wrong_format_is_refused_with_no_convert_saying_what_it_is(self):
        p = self.path("c.wav", wav_bytes(tone(0.2, rate=8000).tobytes(), 8000, 1, 16))
        with self.assertRaises(AudioError) as e:
            read_wav(p, convert=False)
        self.assertIn("8000 Hz", str(e.exception))
        self.assertIn("16000 Hz mono", str(e.exception))

    def test_sox_style_extensible_24_bit_and_float(self):
        s = tone(0.1)
        b24 = b"".join(struct.pack("<i", v << 8)[:3] for v in s)
        got, _ = read_wav(self.path("d.wav", wav_bytes(b24, RATE, 1, 24, extensible=True)))
        self.assertEqual(got, s)
        f32 = array.array("f", (v / 32768 for v in s)).tobytes()
        got, what = read_wav(self.path("e.wav", wav_bytes(f32, RATE, 1, 32, tag=3)))
        self.assertIn("float", what)
        self.assertTrue(all(abs(a - b) <= 1 for a, b in zip(got, s)))

    def test_garbage_missing_and_truncated_files(self):
        with self.assertRaises(AudioError) as e:
            read_wav(self.path("f.wav", b"ID3\x03 not a wav at all"))
        self.assertIn("not a WAV file", str(e.exception))
        with self.assertRaises(AudioError) as e:
            read_wav(os.path.join(self.dir.name, "missing.wav"))
        self.assertIn("No such file", str(e.exception))
        with self.assertRaises(AudioError):
            parse_wav(b"RIFF\x00\x00\x00\x00WAVEfmt ")
        # A data chunk that claims more than is there (a stream cut short): what is there.
        data = wav_bytes(tone(0.1).tobytes(), RATE, 1, 16)
        got, _ = read_wav(self.path("g.wav", data[:-101]))
        self.assertEqual(len(got), 1600 - 51)

    def test_mu_law_is_refused(self):
        with self.assertRaises(AudioError) as e:
            read_wav(self.path("h.wav", wav_bytes(b"\x00" * 100, 8000, 1, 8, tag=7)))
        self.assertIn("PCM", str(e.exception))

    def test_resample_and_mono_helpers(self):
        self.assertEqual(to_mono(array.array("h", [2, 4, -2, -4]), 2), array.array("h", [3, -3]))
        self.assertEqual(len(resample(tone(1, rate=8000), 8000)), 16000)
        self.assertEqual(resample(array.array("h"), 22050), array.array("h"))


class BridgeRefusesBadInputTest(unittest.TestCase):
    """These exit before the venv or a model is touched (exit status 2)."""

    def run_bridge(self, *args, path=None):
        env = dict(os.environ)
        if path is not None:
            env["PATH"] = path
        return subprocess.run([sys.executable, os.path.join(STT, "bridge.py"), *args],
                              capture_output=True, text=True, env=env, timeout=60)

    def test_missing_and_wrong_wavs(self):
        r = self.run_bridge("--wav", "/nonexistent/q.wav")
        self.assertEqual(r.returncode, 2)
        self.assertIn("No such file", r.stderr)
        self.assertEqual(r.stdout, "")
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.wav")
            with open(p, "wb") as f:
                f.write(wav_bytes(tone(0.2, rate=44100).tobytes(), 44100, 1, 16))
            r = self.run_bridge("--wav", p, "--no-convert")
            self.assertEqual(r.returncode, 2)
            self.assertIn("44100 Hz", r.stderr)

    def test_no_microphone(self):
        with tempfile.TemporaryDirectory() as d:
            # No arecord at all.
            r = self.run_bridge(path=d)
            self.assertEqual(r.returncode, 2)
            self.assertIn("no microphone: `arecord` is not installed", r.stderr)
            # arecord without a capture device (what ALSA says on a machine without one).
            fake = os.path.join(d, "arecord")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho 'arecord: device_list:274: no soundcards found...' >&2\n")
            os.chmod(fake, 0o755)
            r = self.run_bridge(path=d + ":/bin:/usr/bin")
            self.assertEqual(r.returncode, 2)
            self.assertIn("no microphone", r.stderr)
            self.assertIn("no soundcards found", r.stderr)
            self.assertIn("--wav FILE", r.stderr)


if __name__ == "__main__":
    unittest.main()
