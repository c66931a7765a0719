"""primd's Wyoming input against the real `wyoming` package (Home Assistant's protocol).

- primd as a Wyoming server (`primd run --wyoming`): the package's client sends
  describe and transcript events (streaming chunks, final transcript, stop); primd
  answers `info` and `handled`, and prints the turn's result on stdout tagged with its
  session `wyoming-N`.
- primd as a transparent proxy (`--wyoming-proxy`) in front of a fake speech service
  built with the package: what Home Assistant sends arrives at the service byte for
  byte and vice versa, and primd retrieves from the service's transcripts.
- Bad input and a service that is down or drops: the connection is closed, the daemon
  keeps serving.

Readiness is the "wyoming: listening on" log line (port 0: the kernel picks the port);
results are awaited as stdout lines, with generous guard timeouts, never timed.
"""

import io
import json
import os
import pathlib
import queue
import re
import socket
import subprocess
import tempfile
import threading
import unittest

from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event, read_event, write_event
from wyoming.error import Error
from wyoming.handle import Handled, NotHandled
from wyoming.info import AsrModel, AsrProgram, Attribution, Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.pipeline import PipelineStage, RunPipeline
from wyoming.vad import VoiceStarted, VoiceStopped
from wyoming.wake import Detection

ROOT = pathlib.Path(__file__).resolve().parents[2]
INDEX = ROOT / "tests" / "data" / "demo-x86.idx"
MODELS = pathlib.Path(os.environ.get("PRIMD_MODEL_DIR", ROOT / "models"))
PRIMD = os.environ.get("PRIMD_BIN", str(ROOT / "target" / "debug" / "primd"))
# Guards against a hung test, not assertions about speed.
GUARD = 120.0

# demo/questions.jsonl: a question of the demo index and its expected top passage.
DOG_QUESTION = "Can I bring my dog inside the museum?"
DOG_PASSAGE = "dogs-and-assistance-animals"
# A question the demo index (a museum kiosk's) has no answer to.
OFF_TOPIC = "What is the capital of France?"


def passage_text(pid):
    for line in (ROOT / "demo" / "corpus.jsonl").read_text().splitlines():
        p = json.loads(line)
        if p["id"] == pid:
            return p["text"]
    raise KeyError(pid)


def spoken(pid):
    """What the server says for passage `pid` on this index (built without sentences:
    "unit": "passages"): one sentence, the passage's first, never the whole passage."""
    return passage_text(pid).split(". ")[0] + "."


class Primd:
    """`primd run --wyoming tcp:127.0.0.1:0 ...` with its stdout lines and log collected."""

    def __init__(self, *extra):
        env = dict(os.environ, RUST_LOG="primd=info")
        self.proc = subprocess.Popen(
            [PRIMD, "run", "--model", str(MODELS), "--index", str(INDEX),
             "--wyoming", "tcp:127.0.0.1:0", *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        self.lines = queue.Queue()
        self.log = []
        self.log_changed = threading.Condition()
        threading.Thread(target=self._stdout, daemon=True).start()
        threading.Thread(target=self._stderr, daemon=True).start()
        m = self.wait_log(r"wyoming: listening on 127\.0\.0\.1:(\d+)")
        self.port = int(m.group(1))

    def _stdout(self):
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def _stderr(self):
        for line in self.proc.stderr:
            with self.log_changed:
                self.log.append(line.decode("utf-8", "replace"))
                self.log_changed.notify_all()
        with self.log_changed:
            self.log.append(None)  # the process ended
            self.log_changed.notify_all()

    def wait_log(self, pattern):
        """The first log line matching `pattern` (waits for it)."""
        rx = re.compile(pattern)
        with self.log_changed:
            seen = 0
            while True:
                for line in self.log[seen:]:
                    if line is None:
                        raise AssertionError("primd exited:\n" + "".join(l for l in self.log if l))
                    m = rx.search(line)
                    if m:
                        return m
                seen = len(self.log)
                if not self.log_changed.wait(GUARD):
                    raise AssertionError(f"no log line {pattern!r}:\n" + "".join(self.log))

    def result(self, text, session=None):
        """The next final result line on stdout for the transcript `text` (and of
        `session`, if given); its session must be a Wyoming one."""
        while True:
            line = self.lines.get(timeout=GUARD)
            if line.get("type") != "final" or line.get("text") != text:
                continue
            if session is None or line.get("session") == session:
                assert re.fullmatch(r"wyoming-\d+", line.get("session", "")), line
                return line

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(GUARD)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


def frames(events):
    """Events framed by the wyoming package, as bytes."""
    buf = io.BytesIO()
    for e in events:
        write_event(e if isinstance(e, Event) else e.event(), buf)
    return buf.getvalue()


def recv_all(sock):
    """Everything `sock` receives until the peer closes (or resets)."""
    chunks = []
    while True:
        try:
            b = sock.recv(65536)
        except ConnectionResetError:
            b = b""
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def parse(data):
    r = io.BytesIO(data)
    out = []
    while True:
        e = read_event(r)
        if e is None:
            return out
        out.append(e)


class WyomingServer(unittest.TestCase):
    """primd run --wyoming: primd is the Wyoming service."""

    @classmethod
    def setUpClass(cls):
        cls.primd = Primd()

    @classmethod
    def tearDownClass(cls):
        cls.primd.stop()

    async def _describe(self):
        async with AsyncTcpClient("127.0.0.1", self.primd.port) as c:
            await c.write_event(Describe().event())
            return await c.read_event()

    def test_describe_answers_info_as_a_handle_service(self):
        import asyncio

        ev = asyncio.run(self._describe())
        self.assertEqual(ev.type, "info")
        info = Info.from_event(ev)
        self.assertEqual(info.asr, [])
        self.assertEqual(len(info.handle), 1)
        h = info.handle[0]
        self.assertEqual(h.name, "primd")
        self.assertTrue(h.installed)
        self.assertFalse(h.supports_home_control)
        self.assertEqual(h.models[0].name, "demo-x86.idx")
        self.assertEqual(h.models[0].languages, ["en"])
        self.assertIn("52 passages", h.models[0].description)

    async def _converse(self, events, replies):
        got = []
        async with AsyncTcpClient("127.0.0.1", self.primd.port) as c:
            for e in events:
                await c.write_event(e.event())
            for _ in range(replies):
                got.append(await c.read_event())
        return got

    def test_streamed_chunks_and_final_transcript_are_retrieved_and_answered(self):
        import asyncio

        events = [
            TranscriptStart(language="en"),
            TranscriptChunk(text="can I"),
            TranscriptChunk(text=" bring my"),
            TranscriptChunk(text=" dog inside"),
            Transcript(text=DOG_QUESTION),
            TranscriptStop(),
        ]
        (reply,) = asyncio.run(self._converse(events, 1))
        self.assertTrue(Handled.is_type(reply.type), reply)
        self.assertEqual(Handled.from_event(reply).text, spoken(DOG_PASSAGE))
        line = self.primd.result(DOG_QUESTION)
        self.assertEqual(line["turn"], 1)
        self.assertEqual(line["text"], DOG_QUESTION)
        self.assertEqual(line["results"][0]["id"], DOG_PASSAGE)

    def test_a_stop_without_transcript_ends_the_turn_with_the_joined_chunks(self):
        import asyncio

        events = [
            TranscriptStart(),
            TranscriptChunk(text="how much is"),
            TranscriptChunk(text=" a ticket for"),
            TranscriptChunk(text=" a child"),
            TranscriptStop(),
            # A second turn on the same connection, answered as turn 2.
            Transcript(text=DOG_QUESTION),
        ]
        (reply,) = asyncio.run(self._converse(events, 1))
        self.assertEqual(reply.type, "handled")
        first = self.primd.result("how much is a ticket for a child")
        self.assertEqual(first["turn"], 1)
        self.assertEqual(first["results"][0]["id"], "ticket-prices")
        second = self.primd.result(DOG_QUESTION, first["session"])
        self.assertEqual((second["turn"], second["results"][0]["id"]), (2, DOG_PASSAGE))

    def test_an_unrelated_question_is_not_handled(self):
        import asyncio

        (reply,) = asyncio.run(self._converse([Transcript(text="zxqv blorf wug")], 1))
        self.assertTrue(NotHandled.is_type(reply.type), reply)

    def test_the_packages_own_events_as_home_assistant_and_satellites_send_them(self):
        """Ping() (`{"text": null}`), Describe(), a Transcript with the language and the
        context Home Assistant's conversation agent adds, and events of a voice pipeline
        that a handle service has no business with (dropped, no error)."""
        import asyncio

        events = [
            Ping(),
            Ping(text="are you there"),
            Describe(),
            RunPipeline(start_stage=PipelineStage.ASR, end_stage=PipelineStage.HANDLE),
            Detection(name="ok_nabu", timestamp=12),
            VoiceStarted(timestamp=0),
            Transcribe(language="en"),
            AudioStart(rate=16000, width=2, channels=1),
            AudioChunk(rate=16000, width=2, channels=1, audio=bytes(640)),
            AudioStop(),
            VoiceStopped(timestamp=900),
            Error(text="a peer's error", code="x"),
            Transcript(text=DOG_QUESTION, language="en",
                       context={"conversation_id": "01JEXAMPLE", "text": None}),
        ]
        got = asyncio.run(self._converse(events, 4))
        self.assertEqual([e.type for e in got], ["pong", "pong", "info", "handled"], got)
        self.assertEqual([Pong.from_event(e).text for e in got[:2]], [None, "are you there"])
        self.assertEqual(Info.from_event(got[2]).handle[0].name, "primd")
        self.assertEqual(Handled.from_event(got[3]).text, spoken(DOG_PASSAGE))

    def test_garbage_gets_an_error_and_the_daemon_keeps_serving(self):
        with socket.create_connection(("127.0.0.1", self.primd.port)) as s:
            s.sendall(b"this is not a wyoming header\n")
            got = parse(recv_all(s))  # primd closes the connection after the error
        self.assertEqual([e.type for e in got], ["error"])
        self.assertIn("bad header", got[0].data["text"])
        # An announced payload over the limit: refused without reading it.
        with socket.create_connection(("127.0.0.1", self.primd.port)) as s:
            s.sendall(b'{"type":"audio-chunk","payload_length":999999999999}\n')
            got = parse(recv_all(s))
        self.assertEqual(got[0].data.get("code"), "bad_frame")
        self.assertIn("payload_length", got[0].data["text"])
        self.assertTrue(self.primd.alive())
        import asyncio

        self.assertEqual(asyncio.run(self._describe()).type, "info")


class WyomingOnePassage(unittest.TestCase):
    """`--top-k 1`: the server speaks the top passage, so its evidence must be the
    retriever's own, not that of a one-passage list (where every top-1 stood alone)."""

    @classmethod
    def setUpClass(cls):
        cls.primd = Primd("--top-k", "1")

    @classmethod
    def tearDownClass(cls):
        cls.primd.stop()

    async def _ask(self, text):
        async with AsyncTcpClient("127.0.0.1", self.primd.port) as c:
            await c.write_event(Transcript(text=text).event())
            return await c.read_event()

    def test_an_off_topic_question_is_not_handled_and_a_museum_one_is(self):
        import asyncio

        off = asyncio.run(self._ask(OFF_TOPIC))
        self.assertTrue(NotHandled.is_type(off.type), off)
        line = self.primd.result(OFF_TOPIC)
        self.assertEqual((line["evidence"], len(line["results"])), ("low", 1), line)
        on = asyncio.run(self._ask(DOG_QUESTION))
        self.assertTrue(Handled.is_type(on.type), on)
        self.assertEqual(Handled.from_event(on).text, spoken(DOG_PASSAGE))


class WyomingStats(unittest.TestCase):
    def test_stats_count_the_socket_clients_only(self):
        """primd's own Wyoming plumbing (the stdout printer, each connection's reply
        reader) is not a client of the socket API: `stats` leaves it out."""
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "primd.sock")
            primd = Primd("--listen", f"unix:{path}", "--input", "none")
            try:
                primd.wait_log(r"listening on unix:")
                with socket.create_connection(("127.0.0.1", primd.port)) as ha:
                    # A Wyoming connection held open, its reply reader registered (its
                    # session and reader exist before it reads its first event).
                    ha.sendall(frames([Describe()]))
                    self.assertEqual(read_event(ha.makefile("rb")).type, "info")
                    api = socket.socket(socket.AF_UNIX)
                    api.connect(path)
                    with api:
                        lines = api.makefile("rb")
                        self.assertEqual(json.loads(lines.readline())["type"], "hello")
                        api.sendall(b'{"cmd":"stats","id":1}\n')
                        stats = json.loads(lines.readline())["stats"]
                self.assertEqual(stats["clients"], 1, stats)
                self.assertEqual(len(stats["clients_detail"]), 1, stats)
                self.assertEqual(stats["sessions"], 1, "the Wyoming connection's session")
            finally:
                primd.stop()


class FakeAsr:
    """A speech-to-text service built with the wyoming package (blocking sockets, one
    connection at a time): it records the exact bytes it receives, answers describe with
    an asr info, and after audio-stop streams a transcript (start, chunks, transcript,
    stop) and closes. With drop_after set, it closes after that many events instead."""

    def __init__(self, transcript, chunks, drop_after=None):
        self.transcript, self.chunks, self.drop_after = transcript, chunks, drop_after
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.received = queue.Queue()  # per connection: the bytes received
        self.sent = queue.Queue()  # per connection: the bytes sent
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self._connection(conn)

    def _connection(self, conn):
        raw_in, raw_out = bytearray(), bytearray()

        class Tee:
            def __init__(self, f):
                self.f = f

            def readline(self):
                b = self.f.readline()
                raw_in.extend(b)
                return b

            def read(self, n):
                b = self.f.read(n)
                raw_in.extend(b)
                return b

        reader = Tee(conn.makefile("rb"))

        def send(events):
            b = frames(events)
            raw_out.extend(b)
            conn.sendall(b)

        n = 0
        while True:
            ev = read_event(reader)
            if ev is None:
                break
            n += 1
            if self.drop_after is not None and n >= self.drop_after:
                break
            if Describe.is_type(ev.type):
                attr = Attribution(name="fake", url="https://example.com")
                model = AsrModel(name="fake-model", attribution=attr, installed=True,
                                 description=None, version=None, languages=["en"])
                send([Info(asr=[AsrProgram(name="fake-asr", attribution=attr, installed=True,
                                           description="fake", version="1.0", models=[model],
                                           supports_transcript_streaming=True)])])
            elif AudioStop.is_type(ev.type):
                events = [TranscriptStart(language="en")]
                events += [TranscriptChunk(text=c) for c in self.chunks]
                send(events)
                # A frame the package would not write itself: inline data, a field
                # primd does not know, another spacing. Relayed as is all the same.
                odd = b'{"type":"x-debug","data":{"text":"kept","n":[1,2]},"extra":true,  "version":"9.9"}\n'
                raw_out.extend(odd)
                conn.sendall(odd)
                send([Transcript(text=self.transcript, language="en"), TranscriptStop()])
                break
        try:
            conn.shutdown(socket.SHUT_WR)
            # Whatever else the peer sends until it closes is received too.
            while True:
                b = conn.recv(65536)
                if not b:
                    break
                raw_in.extend(b)
        except OSError:
            pass
        self.received.put(bytes(raw_in))
        self.sent.put(bytes(raw_out))

    def close(self):
        self.sock.close()


# What Home Assistant sends a speech service for one command: audio chunks whose payloads
# hold newlines and every byte value.
AUDIO = bytes(range(256)) * 12 + b"\n\n{}\n"
HA_EVENTS = frames(
    [Describe(), Transcribe(language="en"), AudioStart(rate=16000, width=2, channels=1)]
    + [AudioChunk(rate=16000, width=2, channels=1, audio=AUDIO[i:] + AUDIO[:i], timestamp=i)
       for i in range(0, 3000, 700)]
    + [AudioStop()]
)


class WyomingProxy(unittest.TestCase):
    """primd run --wyoming ... --wyoming-proxy tcp://ASR: primd sits between HA and the ASR."""

    @classmethod
    def setUpClass(cls):
        cls.asr = FakeAsr(DOG_QUESTION, ["can I", " bring my", " dog inside", " the museum"])
        cls.tmp = tempfile.TemporaryDirectory()
        cls.api = os.path.join(cls.tmp.name, "primd.sock")
        cls.primd = Primd("--wyoming-proxy", f"tcp://127.0.0.1:{cls.asr.port}",
                          "--listen", f"unix:{cls.api}")
        cls.primd.wait_log(r"listening on unix:")

    @classmethod
    def tearDownClass(cls):
        cls.primd.stop()
        cls.asr.close()
        cls.tmp.cleanup()

    def subscriber(self):
        """A socket API client (docs/protocol.md) subscribed to every session."""
        api = socket.socket(socket.AF_UNIX)
        api.connect(self.api)
        lines = api.makefile("rb")
        hello = json.loads(lines.readline())
        self.assertEqual(hello["type"], "hello")
        api.sendall(b'{"cmd":"subscribe","session":"*","id":1}\n')
        reply = json.loads(lines.readline())
        self.assertTrue(reply.get("ok"), reply)
        return api, lines

    def test_events_pass_byte_identical_both_ways_and_transcripts_are_retrieved(self):
        api, api_lines = self.subscriber()
        with socket.create_connection(("127.0.0.1", self.primd.port)) as ha:
            ha.sendall(HA_EVENTS)
            got = recv_all(ha)  # the fake service closes after its transcript
        self.assertEqual(self.asr.received.get(timeout=GUARD), HA_EVENTS)
        sent = self.asr.sent.get(timeout=GUARD)
        self.assertEqual(got, sent)
        types = [e.type for e in parse(got)]
        self.assertEqual(types[0], "info")
        self.assertEqual(types[-2:], ["transcript", "transcript-stop"])
        self.assertIn("x-debug", types)
        line = self.primd.result(DOG_QUESTION)
        self.assertEqual(line["text"], DOG_QUESTION)
        self.assertEqual(line["results"][0]["id"], DOG_PASSAGE)
        # The same result on the socket API, for an agent subscribed there.
        api.settimeout(GUARD)
        with api:
            while True:
                published = json.loads(api_lines.readline())
                if published.get("type") == "final" and published.get("session") == line["session"]:
                    break
        self.assertEqual(published["text"], DOG_QUESTION)
        self.assertEqual(published["turn"], 1)
        self.assertEqual(published["results"][0]["id"], DOG_PASSAGE)

    def test_a_service_that_drops_closes_the_ha_connection_and_the_daemon_serves_on(self):
        self.asr.drop_after = 1  # closes on the first event, answering nothing
        try:
            with socket.create_connection(("127.0.0.1", self.primd.port)) as ha:
                try:
                    ha.sendall(HA_EVENTS)
                except OSError:
                    pass  # closed under our feet: what this test is about
                got = recv_all(ha)
            self.asr.received.get(timeout=GUARD)
            self.asr.sent.get(timeout=GUARD)
        finally:
            self.asr.drop_after = None
        self.assertEqual(got, b"")
        self.primd.wait_log(r"speech service closed the connection|closing both connections")
        self.assertTrue(self.primd.alive())
        # The next connection is relayed normally.
        with socket.create_connection(("127.0.0.1", self.primd.port)) as ha:
            ha.sendall(frames([Describe()]))
            ha.shutdown(socket.SHUT_WR)
            got = parse(recv_all(ha))
        self.asr.received.get(timeout=GUARD)
        self.asr.sent.get(timeout=GUARD)
        self.assertEqual([e.type for e in got], ["info"])


class WyomingProxyServiceDown(unittest.TestCase):
    def test_a_service_that_is_down_closes_the_ha_connection_with_a_logged_reason(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
        s.close()  # nothing listens there now
        primd = Primd("--wyoming-proxy", f"tcp://127.0.0.1:{dead}")
        try:
            for _ in range(2):
                with socket.create_connection(("127.0.0.1", primd.port)) as ha:
                    ha.sendall(frames([Describe()]))
                    self.assertEqual(recv_all(ha), b"")
            primd.wait_log(rf"speech service 127\.0\.0\.1:{dead} unreachable")
            self.assertTrue(primd.alive())
        finally:
            primd.stop()


class WyomingFlags(unittest.TestCase):
    def test_a_remote_address_needs_allow_remote(self):
        r = subprocess.run(
            [PRIMD, "run", "--model", str(MODELS), "--index", str(INDEX), "--wyoming", "tcp:0.0.0.0:0"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=GUARD,
        )
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"--allow-remote", r.stderr)


if __name__ == "__main__":
    unittest.main()
