"""The asyncio client: the same protocol and state as the blocking one, awaited.

For agent frameworks that run on an event loop (Pipecat, LiveKit Agents). One reader
task takes every line off the socket as it comes, so results are never left waiting in
the kernel while the agent is busy (primd would disconnect it, docs/protocol.md); calls
await futures that the reader resolves, each with a timeout. No threads.
"""

import asyncio
import logging
import time
from collections import deque

from . import protocol as p

log = logging.getLogger("primd_client")


class AsyncClient:
    """A connection to `primd run --listen`, for asyncio.

        client = await AsyncClient.connect("unix:/run/primd/primd.sock")
        await client.partial("room-1/alice", 3, "when does the museum")
        result = await client.query("room-1/alice", 3, "when does the museum open")
        await client.close()

    `on_result(msg)`, if given, is called on the event loop for every result line
    (speculative and final); it must not block.
    """

    def __init__(self, reader, writer, hello, *, on_result=None, max_line=p.DEFAULT_MAX_LINE,
                 keep=1024, _rest=b""):
        self._reader = reader
        self._writer = writer
        self.hello = hello
        self.max_frame = int(hello.get("max_frame") or p.SERVER_MAX_FRAME)
        self._on_result = on_result
        self._lines = p.LineBuffer(max_line)
        self._router = p.Router(keep)
        self._pending = {}  # command id → future of the reply
        self._waiters = {}  # (session, turn) → [futures]
        self._results = deque(maxlen=keep)
        self._results_event = asyncio.Event()
        self.results_dropped = 0
        self.errors = deque(maxlen=64)
        self._closed = None
        self._drain_lock = asyncio.Lock()
        if _rest:
            self._feed(_rest)
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(cls, address, *, timeout=5.0, **kwargs):
        """Connects, reads the hello line and checks the protocol version."""
        kind, where = p.parse_address(address)
        max_line = kwargs.get("max_line", p.DEFAULT_MAX_LINE)

        async def open_and_greet():
            if kind == "unix":
                reader, writer = await asyncio.open_unix_connection(where)
            else:
                reader, writer = await asyncio.open_connection(where[0], where[1])
            try:
                buf = p.LineBuffer(max_line)
                while True:
                    data = await reader.read(65536)
                    if not data:
                        raise p.ConnectionClosed("primd closed the connection before its hello")
                    lines = buf.feed(data)
                    if lines:
                        hello = p.check_hello(p.decode(lines[0]))
                        rest = b"".join(l + b"\n" for l in lines[1:]) + bytes(buf.buf)
                        return reader, writer, hello, rest
            except BaseException:
                writer.close()
                raise

        try:
            reader, writer, hello, rest = await asyncio.wait_for(open_and_greet(), timeout)
        except asyncio.TimeoutError:
            raise p.Timeout(f"no hello from primd at {address} within {timeout} s") from None
        except OSError as e:
            raise p.ConnectionClosed(f"cannot connect to {address}: {e}") from None
        return cls(reader, writer, hello, _rest=rest, **kwargs)

    async def close(self):
        self._set_closed("closed by the client")
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    @property
    def closed(self):
        return self._closed is not None

    # -- transcripts ------------------------------------------------------------------

    async def partial(self, session, turn, text, context=True):
        await self._transcript(session, turn, "partial", str(text), context)

    async def final(self, session, turn, text, context=True, context_tokens=None):
        await self._transcript(session, turn, "final", str(text), context, context_tokens)

    async def end_of_speech(self, session, turn, context=True):
        await self._transcript(session, turn, "end_of_speech", True, context)

    async def wait_final(self, session, turn, timeout=5.0):
        """The final result of (session, turn); raises Timeout, TurnAbandoned,
        ServerError or ConnectionClosed, like the blocking client."""
        key = (session, turn)
        got = self._router.take(key)
        if got is not None:
            return got
        if self._closed is not None:
            raise self._closed
        fut = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            raise p.Timeout(f"no final for session {session!r} turn {turn} "
                            f"within {timeout} s") from None
        finally:
            waiters = self._waiters.get(key)
            if waiters and fut in waiters:
                waiters.remove(fut)
                if not waiters:
                    del self._waiters[key]
        got = self._router.take(key)
        if got is not None:
            return got
        raise self._closed or p.PrimdError("woken without a result")

    def result_ready(self, session, turn):
        """True when the final of (session, turn) has arrived and not been collected."""
        return (session, turn) in self._router.finals

    async def query(self, session, turn, text, timeout=5.0, context=True, context_tokens=None):
        await self.final(session, turn, text, context, context_tokens)
        return await self.wait_final(session, turn, timeout)

    async def next_result(self, timeout=5.0):
        """The next result line (speculative or final), oldest first; bounded like
        the blocking client's."""
        deadline = time.monotonic() + timeout
        while not self._results:
            if self._closed is not None:
                raise self._closed
            self._results_event.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise p.Timeout(f"no result within {timeout} s")
            try:
                await asyncio.wait_for(self._results_event.wait(), left)
            except asyncio.TimeoutError:
                pass
        return self._results.popleft()

    # -- commands ---------------------------------------------------------------------

    async def subscribe(self, session, speculative=False, timeout=5.0):
        return await self._command("subscribe", timeout, session=session,
                                   speculative=True if speculative else None)

    async def unsubscribe(self, session, timeout=5.0):
        return await self._command("unsubscribe", timeout, session=session)

    async def close_session(self, session, timeout=5.0):
        """Ends one of this connection's sessions (its open turn is abandoned)."""
        reply = await self._command("close", timeout, session=session)
        abandoned = self._router.close_session(session)
        if abandoned:
            self._fail(abandoned, p.TurnAbandoned(
                f"turn {abandoned[1]} of session {session!r} was abandoned by closing it"))
        return reply

    async def reset(self, session, timeout=5.0):
        """Forgets a session's conversation (one of this connection's, or "stt")."""
        return await self._command("reset", timeout, session=session)

    async def topic(self, session, text=None, passage=None, timeout=5.0):
        """Sets a session's conversation topic (`text`, or a `passage` id; neither
        clears it); returns the topic kept."""
        reply = await self._command("topic", timeout, session=session, text=text,
                                    passage=passage)
        return reply.get("topic")

    async def reload(self, timeout=30.0):
        return await self._command("reload", timeout)

    async def stats(self, timeout=5.0):
        return (await self._command("stats", timeout))["stats"]

    async def ping(self, timeout=5.0):
        t0 = time.monotonic()
        await self._command("ping", timeout)
        return time.monotonic() - t0

    # -- internals --------------------------------------------------------------------

    async def _write(self, msg):
        line = p.encode(msg, self.max_frame)
        self._router.sent_line(msg)
        self._writer.write(line)
        try:
            async with self._drain_lock:  # Python 3.9 refuses concurrent drains
                await self._writer.drain()
        except (OSError, RuntimeError) as e:
            self._set_closed(f"send failed: {e}")
            raise self._closed from None

    async def _transcript(self, session, turn, key, value, context=True, context_tokens=None):
        if self._closed is not None:
            raise self._closed
        msg, abandoned = self._router.transcript(session, turn, key, value, context,
                                                 context_tokens)
        if abandoned:
            self._fail(abandoned, p.TurnAbandoned(
                f"turn {abandoned[1]} of session {session!r} was abandoned by turn {turn}"))
        await self._write(msg)

    async def _command(self, cmd, timeout, **fields):
        if self._closed is not None:
            raise self._closed
        ident, msg = self._router.command(cmd, **fields)
        fut = asyncio.get_running_loop().create_future()
        self._pending[ident] = fut
        try:
            await self._write(msg)
            reply = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            raise p.Timeout(f"no reply to {cmd} within {timeout} s") from None
        finally:
            self._pending.pop(ident, None)
        if reply.get("type") == "error":
            raise p.ServerError(reply)
        return reply

    async def _read_loop(self):
        reason = "primd closed the connection"
        try:
            while self._closed is None:
                data = await self._reader.read(65536)
                if not data:
                    break
                self._feed(data)
        except p.ProtocolError as e:
            reason = str(e)
        except (OSError, asyncio.IncompleteReadError) as e:
            reason = f"socket error: {e}"
        self._set_closed(reason)

    def _feed(self, data):
        for line in self._lines.feed(data):
            if line.strip():
                self._dispatch(p.decode(line))

    def _wake(self, key):
        for fut in self._waiters.pop(key, []):
            if not fut.done():
                fut.set_result(None)

    def _fail(self, key, exc):
        self._router.store_failure(key, exc)
        self._wake(key)

    def _dispatch(self, msg):
        kind = msg.get("type")
        if kind in ("final", "speculative"):
            if kind == "final":
                self._wake(self._router.store_final(msg))
            if len(self._results) == self._results.maxlen:
                self.results_dropped += 1
            self._results.append(msg)
            self._results_event.set()
            if self._on_result is not None:
                try:
                    self._on_result(msg)
                except Exception:
                    log.exception("on_result callback failed")
        elif kind in ("reply", "error") and msg.get("id") in self._pending:
            fut = self._pending[msg["id"]]
            if not fut.done():
                fut.set_result(msg)
        elif kind == "error":
            key = self._router.turn_of_error(msg)
            if key is not None:
                self._fail(key, p.ServerError(msg))
            else:
                self.errors.append(msg)
                log.warning("primd error: %s %s", msg.get("code"), msg.get("message"))

    def _set_closed(self, reason):
        if self._closed is not None:
            return
        self._closed = p.ConnectionClosed(reason)
        for futs in self._waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.set_result(None)
        self._waiters.clear()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(self._closed)
        self._results_event.set()
