#!/usr/bin/env python3
"""Writes tests/data/wyoming/*.bin: event streams framed by the real `wyoming` package
(pinned in tests/python/requirements.txt), for the Rust framing tests and fuzz seeds.

    PRIMD_VENV=... "$PRIMD_VENV/bin/python" tools/wyoming-fixtures.py
"""
import io
import pathlib

from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import write_event
from wyoming.info import Attribution, AsrModel, AsrProgram, Describe, Info
from wyoming.ping import Ping

out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "wyoming"
out.mkdir(parents=True, exist_ok=True)


def stream(name, events):
    buf = io.BytesIO()
    for e in events:
        write_event(e.event() if hasattr(e, "event") else e, buf)
    (out / name).write_bytes(buf.getvalue())


# What a streaming ASR service (protocol >= 1.7) sends Home Assistant for one command,
# with the audio HA sent it in between (audio-chunk payloads).
audio = bytes(range(256)) * 8  # 2,048 bytes of "PCM"
stream(
    "asr-streaming.bin",
    [
        Transcribe(language="en"),
        AudioStart(rate=16000, width=2, channels=1),
        AudioChunk(rate=16000, width=2, channels=1, audio=audio),
        TranscriptStart(language="en"),
        TranscriptChunk(text="what is"),
        AudioChunk(rate=16000, width=2, channels=1, audio=audio[:1000]),
        TranscriptChunk(text=" the capital"),
        TranscriptChunk(text=" of france"),
        AudioStop(),
        Transcript(text="What is the capital of France?"),
        TranscriptStop(),
    ],
)
# A non-streaming service: one transcript, no chunks; and describe -> info.
attr = Attribution(name="test", url="https://example.com")
info = Info(
    asr=[
        AsrProgram(
            name="fake-asr",
            attribution=attr,
            installed=True,
            description="fixture",
            version="1.0",
            models=[AsrModel(name="m", attribution=attr, installed=True, description=None, version=None, languages=["en"])],
            supports_transcript_streaming=True,
        )
    ]
)
stream("asr-plain.bin", [Describe(), info, Transcript(text="how tall is mount everest"), Transcript(text="")])
# What a handle service (primd's Wyoming server) is sent: health checks (Ping() writes
# `"text": null`), describe, and the transcript Home Assistant's conversation agent sends,
# with its language and context.
stream(
    "handle-client.bin",
    [
        Ping(),
        Ping(text="are you there"),
        Describe(),
        Transcript(text="Can I bring my dog?", language="en", context={"conversation_id": "01J"}),
    ],
)
