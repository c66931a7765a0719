"""Where utterances are, and when to ask the recognizer for a new hypothesis.

An energy voice-activity detector over 30 ms frames: a frame is voiced when its level
is at least `margin_db` over the noise floor (the quietest frame of the last few
seconds) and over `min_dbfs`; speech starts after `start_ms` of voiced frames and ends
after `silence_ms` of unvoiced ones. No model: robust enough for a kiosk microphone or
a synthetic voice, and testable alone. Speech has quiet moments between words, so the
floor stays under it; a sound that never varies (a hum, a fan) is taken for the floor
once it has lasted `floor_s`.

The `Segmenter` keeps the open utterance's audio (with a little audio from before the
speech started) and, fed blocks of samples, says what to do: re-transcribe the open
utterance for a partial every `chunk_ms` of new audio, transcribe it for a final when
the speech ends (or reaches `max_s`, or the input ends). The transcribing itself is a
callback, so this module is standard library only and unit-tested without a model.
"""

import array
import math
from collections import deque

RATE = 16000
FRAME = RATE * 30 // 1000  # 480 samples, 30 ms


def level_dbfs(frame):
    """RMS level of int16 samples in dB below full scale (-100 for digital silence)."""
    if not frame:
        return -100.0
    energy = sum(v * v for v in frame) / len(frame)
    return max(-100.0, 10 * math.log10(energy / (32768.0 * 32768.0))) if energy > 0 else -100.0


class EnergyVad:
    """Per-frame speech/non-speech with hysteresis; `push(frame)` returns "start",
    "end" or None."""

    def __init__(self, margin_db=10.0, min_dbfs=-50.0, start_ms=90, silence_ms=600,
                 floor_s=5.0):
        self.margin_db = margin_db
        self.min_dbfs = min_dbfs
        self.start_frames = max(1, start_ms // 30)
        self.end_frames = max(1, silence_ms // 30)
        self.levels = deque(maxlen=max(1, int(floor_s * 1000 / 30)))
        self.in_speech = False
        self.run = 0  # consecutive frames against the current state
        self.peak_dbfs = -100.0

    def threshold(self):
        floor = min(self.levels) if self.levels else -100.0
        return max(self.min_dbfs, floor + self.margin_db)

    def push(self, frame):
        db = level_dbfs(frame)
        self.peak_dbfs = max(self.peak_dbfs, db)
        voiced = db >= self.threshold()
        self.levels.append(db)
        if voiced != self.in_speech:
            self.run += 1
        else:
            self.run = 0
        if not self.in_speech and self.run >= self.start_frames:
            self.in_speech, self.run = True, 0
            return "start"
        if self.in_speech and self.run >= self.end_frames:
            self.in_speech, self.run = False, 0
            return "end"
        return None


class Segmenter:
    """Blocks of 16 kHz int16 samples in, (kind, t, text) events out: kind "partial" or
    "final", t the audio time (seconds since the first sample) the hypothesis is of.

    `transcribe(samples) -> str` is called for each partial and final. Partials whose
    text is empty or unchanged are not emitted; a final is emitted when any partial was,
    or when its own text is not empty (a noise burst with no words gives nothing)."""

    def __init__(self, transcribe, chunk_ms=500, silence_ms=600, max_s=20.0, preroll_ms=300,
                 vad=None):
        self.transcribe = transcribe
        self.chunk = RATE * chunk_ms // 1000
        self.max_samples = int(max_s * RATE)
        self.vad = vad or EnergyVad(silence_ms=silence_ms)
        self.preroll = deque(maxlen=max(1, preroll_ms // 30))
        self.pending = array.array("h")  # samples not yet a whole frame
        self.segment = None  # array of the open utterance's samples, or None
        self.since_partial = 0
        self.last_text = ""
        self.partials = 0
        self.pos = 0  # samples consumed into frames
        self.utterances = 0

    def _t(self):
        return round(self.pos / RATE, 3)

    def _final(self, events):
        text = clean(self.transcribe(self.segment))
        if text or self.partials:
            events.append(("final", self._t(), text))
            self.utterances += 1
        self.segment, self.last_text, self.partials, self.since_partial = None, "", 0, 0

    def feed(self, samples):
        """Consume a block; returns the events it caused (at most one partial per block,
        so a caller that fell behind and feeds a large block transcribes once)."""
        events = []
        self.pending.extend(samples)
        n = len(self.pending) // FRAME * FRAME
        for i in range(0, n, FRAME):
            frame = self.pending[i:i + FRAME]
            self.pos += FRAME
            change = self.vad.push(frame)
            if self.segment is None:
                self.preroll.append(frame)
                if change == "start":
                    self.segment = array.array("h")
                    for f in self.preroll:
                        self.segment.extend(f)
                    self.preroll.clear()
                    self.since_partial = len(self.segment)
                continue
            self.segment.extend(frame)
            self.since_partial += FRAME
            if change == "end" or len(self.segment) >= self.max_samples:
                self._final(events)
                if self.vad.in_speech:  # cut at max_s: the speech goes on in a new one
                    self.segment = array.array("h")
        del self.pending[:n]
        # The samples short of a whole frame count as heard: a partial is due every
        # chunk of audio fed, not every chunk rounded up to frames.
        if self.segment is not None and self.since_partial + len(self.pending) >= self.chunk:
            self.since_partial = -len(self.pending)
            text = clean(self.transcribe(self.segment))
            if text and text != self.last_text:
                self.last_text = text
                self.partials += 1
                events.append(("partial", round((self.pos + len(self.pending)) / RATE, 3), text))
        return events

    def flush(self):
        """The input ended: the open utterance's final, if any."""
        events = []
        if self.pending:
            self.pos += len(self.pending)
            if self.segment is not None:
                self.segment.extend(self.pending)
            self.pending = array.array("h")
        if self.segment is not None:
            self._final(events)
        return events

    @property
    def heard_speech(self):
        return self.utterances > 0 or self.segment is not None


def clean(text):
    """One line of single-spaced text."""
    return " ".join((text or "").split())
