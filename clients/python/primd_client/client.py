"""The blocking client: one socket, one reader thread, calls that wait with timeouts.

For scripts, threads and frameworks without an event loop. A reader thread owns the
receiving side so that results for every session are taken off the socket as they come
(primd disconnects a client whose queue overflows, docs/protocol.md); callers block only
on a condition variable, never on the socket, and every wait has a timeout.
"""

import logging
import socket
import threading
import time
from collections import deque

from . import protocol as p

log = logging.getLogger("primd_client")


class Client:
    """A connection to `primd run --listen`.

        with Client.connect("unix:/run/primd/primd.sock") as c:
            c.partial("kiosk-1", 1, "what time does the")
            result = c.query("kiosk-1", 1, "what time does the museum open")
            print(result["results"][0]["title"])

    `on_result(msg)`, if given, is called on the reader thread for every result line
    (speculative and final, own sessions and subscriptions); it must not block.
    """

    def __init__(self, sock, hello, *, on_result=None, max_line=p.DEFAULT_MAX_LINE,
                 keep=1024, io_timeout=30.0, _rest=b""):
        self._sock = sock
        self.hello = hello
        self.max_frame = int(hello.get("max_frame") or p.SERVER_MAX_FRAME)
        self._on_result = on_result
        self._lines = p.LineBuffer(max_line)
        self._router = p.Router(keep)
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._pending = {}  # command id → reply (None until it comes)
        self._results = deque(maxlen=keep)
        self.results_dropped = 0
        self.errors = deque(maxlen=64)  # error replies tied to no call
        self._closed = None  # ConnectionClosed once closed
        sock.settimeout(io_timeout)
        if _rest:
            self._feed(_rest)  # lines that came with the hello, before the reader starts
        self._reader = threading.Thread(target=self._read_loop, name="primd-client-reader",
                                        daemon=True)
        self._reader.start()

    # -- connecting -------------------------------------------------------------------

    @classmethod
    def connect(cls, address, *, timeout=5.0, **kwargs):
        """Connects, reads the hello line and checks the protocol version (ProtocolError
        if it is not 1). `address`: `unix:PATH` or `tcp:HOST:PORT`."""
        kind, where = p.parse_address(address)
        if kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        else:
            info = socket.getaddrinfo(where[0], where[1], type=socket.SOCK_STREAM)[0]
            sock = socket.socket(info[0], socket.SOCK_STREAM)
            where = info[4]
        sock.settimeout(timeout)
        try:
            sock.connect(where)
            if kind == "tcp":
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello, rest = _read_first_line(sock, kwargs.get("max_line", p.DEFAULT_MAX_LINE))
            p.check_hello(hello)
        except socket.timeout:
            sock.close()
            raise p.Timeout(f"no hello from primd at {address} within {timeout} s") from None
        except OSError as e:
            sock.close()
            raise p.ConnectionClosed(f"cannot connect to {address}: {e}") from None
        except p.PrimdError:
            sock.close()
            raise
        return cls(sock, hello, _rest=rest, **kwargs)

    def close(self):
        """Closes the connection; calls still waiting get ConnectionClosed."""
        self._set_closed("closed by the client")
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return self._closed is not None

    # -- transcripts ------------------------------------------------------------------

    # A session is a conversation: primd retrieves each turn with what its earlier
    # turns established ("who designed it?" after "when was the museum built?").
    # `context=False` retrieves that turn alone; `reset(session)` forgets the earlier
    # turns (docs/conversations.md).

    def partial(self, session, turn, text, context=True):
        """The whole hypothesis so far of `turn` (not a delta)."""
        self._transcript(session, turn, "partial", str(text), context)

    def final(self, session, turn, text, context=True, context_tokens=None):
        """The recognizer's final transcript: ends the turn; primd answers it."""
        self._transcript(session, turn, "final", str(text), context, context_tokens)

    def end_of_speech(self, session, turn, context=True):
        """Ends the turn without text: the newest partial is the final."""
        self._transcript(session, turn, "end_of_speech", True, context)

    def wait_final(self, session, turn, timeout=5.0):
        """The final result of (session, turn): a dict as in docs/protocol.md. Raises
        Timeout, TurnAbandoned, ServerError (e.g. session_owned) or ConnectionClosed."""
        key = (session, turn)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = self._router.take(key)
                if got is not None:
                    return got
                if self._closed is not None:
                    raise self._closed
                left = deadline - time.monotonic()
                if left <= 0:
                    raise p.Timeout(f"no final for session {session!r} turn {turn} "
                                    f"within {timeout} s")
                self._cond.wait(left)

    def query(self, session, turn, text, timeout=5.0, context=True, context_tokens=None):
        """Sends the final of `turn` and waits for its result."""
        self.final(session, turn, text, context, context_tokens)
        return self.wait_final(session, turn, timeout)

    # -- results of subscriptions -------------------------------------------------------

    def next_result(self, timeout=5.0):
        """The next result line (speculative or final, any session this connection
        receives), oldest first; at most `keep` wait (older ones are dropped and
        counted in `results_dropped`)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._results:
                if self._closed is not None:
                    raise self._closed
                left = deadline - time.monotonic()
                if left <= 0:
                    raise p.Timeout(f"no result within {timeout} s")
                self._cond.wait(left)
            return self._results.popleft()

    # -- commands ---------------------------------------------------------------------

    def subscribe(self, session, speculative=False, timeout=5.0):
        """Also receive the results of `session` (`"*"`: all); with `speculative`,
        the speculative lines too (own sessions included)."""
        return self._command("subscribe", timeout, session=session,
                             speculative=True if speculative else None)

    def unsubscribe(self, session, timeout=5.0):
        return self._command("unsubscribe", timeout, session=session)

    def close_session(self, session, timeout=5.0):
        """Ends one of this connection's sessions (its open turn is abandoned); the
        name is free again, for any connection."""
        reply = self._command("close", timeout, session=session)
        with self._cond:
            abandoned = self._router.close_session(session)
            if abandoned:
                self._router.store_failure(abandoned, p.TurnAbandoned(
                    f"turn {abandoned[1]} of session {session!r} was abandoned by closing it"))
                self._cond.notify_all()
        return reply

    def reset(self, session, timeout=5.0):
        """Forgets the conversation of one of this connection's sessions (or of "stt",
        the pipe): its next turn is retrieved alone."""
        return self._command("reset", timeout, session=session)

    def topic(self, session, text=None, passage=None, timeout=5.0):
        """Sets the conversation topic of one of this connection's sessions (or of
        "stt"): what the agent just answered about, as a `text` or the id of a `passage`
        it used; neither clears it. Returns the topic kept (None: cleared)."""
        return self._command("topic", timeout, session=session, text=text,
                             passage=passage).get("topic")

    def reload(self, timeout=30.0):
        """What SIGHUP does; ServerError(`reload_failed`) if the index file is invalid
        (the old index keeps serving)."""
        return self._command("reload", timeout)

    def stats(self, timeout=5.0):
        """primd's counters (the reply's `stats` object)."""
        return self._command("stats", timeout)["stats"]

    def ping(self, timeout=5.0):
        """Round-trip time in seconds."""
        t0 = time.monotonic()
        self._command("ping", timeout)
        return time.monotonic() - t0

    # -- internals --------------------------------------------------------------------

    def _send(self, build):
        """Builds and counts (under the state lock) and sends one message; line
        numbers follow the send order because both happen under the send lock."""
        with self._send_lock:
            with self._cond:
                if self._closed is not None:
                    raise self._closed
                msg, after = build()
                line = p.encode(msg, self.max_frame)
                # Counted before sending: primd's error reply naming this line can
                # come back before sendall returns.
                self._router.sent_line(msg)
            try:
                self._sock.sendall(line)
            except socket.timeout:
                self._set_closed("send timed out (primd not reading)")
                raise self._closed from None
            except OSError as e:
                self._set_closed(f"send failed: {e}")
                raise self._closed from None
            if after:
                with self._cond:
                    after()

    def _transcript(self, session, turn, key, value, context=True, context_tokens=None):
        def build():
            msg, abandoned = self._router.transcript(session, turn, key, value, context,
                                                     context_tokens)

            def after():
                if abandoned:
                    self._router.store_failure(abandoned, p.TurnAbandoned(
                        f"turn {abandoned[1]} of session {session!r} was abandoned by turn {turn}"))
                    self._cond.notify_all()
            return msg, after
        self._send(build)

    def _command(self, cmd, timeout, **fields):
        ident = None

        def build():
            nonlocal ident
            ident, msg = self._router.command(cmd, **fields)
            self._pending[ident] = None
            return msg, None
        try:
            self._send(build)
            deadline = time.monotonic() + timeout
            with self._cond:
                while self._pending.get(ident) is None:
                    if self._closed is not None:
                        raise self._closed
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise p.Timeout(f"no reply to {cmd} within {timeout} s")
                    self._cond.wait(left)
                reply = self._pending[ident]
        finally:
            with self._cond:
                self._pending.pop(ident, None)
        if reply.get("type") == "error":
            raise p.ServerError(reply)
        return reply

    def _read_loop(self):
        reason = "primd closed the connection"
        try:
            while self._closed is None:
                try:
                    data = self._sock.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                self._feed(data)
        except p.ProtocolError as e:
            reason = str(e)
        except OSError as e:
            reason = f"socket error: {e}"
        self._set_closed(reason)

    def _feed(self, data):
        for line in self._lines.feed(data):
            if line.strip():
                self._dispatch(p.decode(line))

    def _dispatch(self, msg):
        kind = msg.get("type")
        callback = None
        with self._cond:
            if kind in ("final", "speculative"):
                if kind == "final":
                    self._router.store_final(msg)
                if len(self._results) == self._results.maxlen:
                    self.results_dropped += 1
                self._results.append(msg)
                callback = self._on_result
            elif kind in ("reply", "error") and msg.get("id") in self._pending:
                self._pending[msg["id"]] = msg
            elif kind == "error":
                key = self._router.turn_of_error(msg)
                if key is not None:
                    self._router.store_failure(key, p.ServerError(msg))
                else:
                    self.errors.append(msg)
                    log.warning("primd error: %s %s", msg.get("code"), msg.get("message"))
            self._cond.notify_all()
        if callback is not None:
            try:
                callback(msg)
            except Exception:  # a user callback must not kill the reader
                log.exception("on_result callback failed")

    def _set_closed(self, reason):
        with self._cond:
            if self._closed is None:
                self._closed = p.ConnectionClosed(reason)
            self._cond.notify_all()


def _read_first_line(sock, max_line):
    buf = p.LineBuffer(max_line)
    while True:
        data = sock.recv(65536)
        if not data:
            raise p.ConnectionClosed("primd closed the connection before its hello")
        lines = buf.feed(data)
        if lines:
            rest = b"\n".join(lines[1:]) + (b"\n" if len(lines) > 1 else b"") + bytes(buf.buf)
            return p.decode(lines[0]), rest
