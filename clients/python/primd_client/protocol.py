"""What both clients share: addresses, the line framing, message building, errors.

The sync and the asyncio client differ only in how they wait; everything that decides
what goes on the wire, what a reply means and which turn a result belongs to lives here
once, so the two cannot drift apart. docs/protocol.md (version 1) is the contract.
"""

import json
from collections import OrderedDict

from .results import Result

PROTOCOL = 1
"""The protocol version this package speaks (docs/protocol.md)."""

SERVER_MAX_FRAME = 65536
"""primd's frame limit for lines it receives (the hello line may announce another)."""

DEFAULT_MAX_LINE = 4 * 1024 * 1024
"""Longest line accepted from primd; a final with a long top-k stays far below."""

MAX_SESSION_BYTES = 64


class PrimdError(Exception):
    """Base class of every error this package raises."""


class ConnectionClosed(PrimdError):
    """The connection ended (primd stopped, the socket broke, or close() was called);
    every call waiting on it gets this. `reason` says which."""

    def __init__(self, reason):
        super().__init__(f"connection to primd closed: {reason}")
        self.reason = reason


class ProtocolError(PrimdError):
    """primd sent something this client cannot use (no hello, another protocol version,
    a line over the limit, not JSON). The connection is closed."""


class ServerError(PrimdError):
    """primd answered with an error reply (`code`, `message`, as in docs/protocol.md)."""

    def __init__(self, msg):
        self.code = msg.get("code", "")
        self.message = msg.get("message", "")
        self.reply = msg
        super().__init__(f"primd error {self.code}: {self.message}")


class TurnAbandoned(PrimdError):
    """A newer turn of the same session was sent before this one ended, so primd will
    never answer it (docs/protocol.md, "abandons the open one")."""


class Timeout(PrimdError, TimeoutError):
    """No answer within the timeout the caller gave."""



# The largest `context_tokens` a turn may ask for (docs/protocol.md).
MAX_CONTEXT_TOKENS = 1_000_000

def parse_address(address):
    """`unix:PATH` or `tcp:HOST:PORT` (as `primd run --listen` takes) →
    `("unix", path)` or `("tcp", (host, port))`."""
    if not isinstance(address, str):
        raise ValueError(f"address must be a string like unix:PATH or tcp:HOST:PORT, got {address!r}")
    if address.startswith("unix:"):
        path = address[5:]
        if not path:
            raise ValueError("unix: address without a path")
        return "unix", path
    if address.startswith("tcp:"):
        host, sep, port = address[4:].rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad tcp address {address!r}: expected tcp:HOST:PORT")
        return "tcp", (host.strip("[]"), int(port))
    raise ValueError(f"bad address {address!r}: expected unix:PATH or tcp:HOST:PORT")


def check_session(session):
    if not isinstance(session, str) or not 1 <= len(session.encode("utf-8")) <= MAX_SESSION_BYTES:
        raise ValueError(f"session must be a string of 1 to {MAX_SESSION_BYTES} bytes, got {session!r}")


def check_turn(turn):
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 0:
        raise ValueError(f"turn must be a non-negative integer, got {turn!r}")


def check_context_tokens(context_tokens):
    """None (primd's budget) or an integer 0..=MAX_CONTEXT_TOKENS (raises ValueError)."""
    if context_tokens is not None and (
            isinstance(context_tokens, bool) or not isinstance(context_tokens, int)
            or not 0 <= context_tokens <= MAX_CONTEXT_TOKENS):
        raise ValueError(f"context_tokens is an integer, 0..={MAX_CONTEXT_TOKENS}: "
                         f"{context_tokens!r}")


def encode(msg, max_frame):
    """One message → one UTF-8 line; refuses (ValueError) a line primd would refuse."""
    line = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    if len(line) - 1 > max_frame:
        raise ValueError(f"message of {len(line) - 1} bytes exceeds primd's frame limit of {max_frame}")
    return line


def decode(line):
    """One received line (without its newline) → dict; a ProtocolError if not an object."""
    if line.endswith(b"\r"):
        line = line[:-1]
    try:
        msg = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(f"primd sent a line that is not JSON: {e}") from None
    if not isinstance(msg, dict):
        raise ProtocolError("primd sent a JSON line that is not an object")
    if msg.get("type") in ("final", "speculative"):
        return Result(msg)  # `result.context` typed (results.py)
    return msg


def check_hello(msg):
    """The first line must be the hello of protocol 1; returns it."""
    if msg.get("type") != "hello":
        raise ProtocolError(f"expected a hello line first, got {msg.get('type')!r}")
    if msg.get("protocol") != PROTOCOL:
        raise ProtocolError(
            f"primd speaks protocol {msg.get('protocol')!r}, this client speaks {PROTOCOL}")
    return msg


class LineBuffer:
    """Splits received bytes into lines, refusing any longer than `max_line`."""

    def __init__(self, max_line):
        self.max_line = max_line
        self.buf = bytearray()

    def feed(self, data):
        self.buf += data
        lines = []
        start = 0
        while True:
            nl = self.buf.find(b"\n", start)
            if nl < 0:
                break
            if nl - start > self.max_line:
                raise ProtocolError(f"primd sent a line over the {self.max_line}-byte limit")
            lines.append(bytes(self.buf[start:nl]))
            start = nl + 1
        del self.buf[:start]
        if len(self.buf) > self.max_line:
            raise ProtocolError(f"primd sent a line over the {self.max_line}-byte limit")
        return lines


class Router:
    """The client's state, free of I/O: which turns are open or ended, which line
    carried which turn (so an error reply naming a line fails that turn's waiter),
    the finals not yet collected, the results of subscriptions.

    Everything is bounded: at most `keep` finals wait to be collected and `keep`
    line numbers are remembered (oldest dropped first); subscription results go to
    the caller's queue, which bounds itself.
    """

    def __init__(self, keep=1024):
        self.keep = keep
        self.lines_sent = 0
        self.line_turn = OrderedDict()  # line number → (session, turn)
        self.newest = OrderedDict()  # session → newest turn sent (recently used last)
        self.ended = OrderedDict()  # (session, turn) → True once final/end_of_speech sent
        self.finals = OrderedDict()  # (session, turn) → final result not yet collected
        self.failed = OrderedDict()  # (session, turn) → exception
        self.next_id = 0

    def _bound(self, d):
        while len(d) > self.keep:
            d.popitem(last=False)

    def command(self, cmd, **fields):
        self.next_id += 1
        msg = {"cmd": cmd, "id": self.next_id}
        msg.update({k: v for k, v in fields.items() if v is not None})
        return self.next_id, msg

    def transcript(self, session, turn, key, value, context=True, context_tokens=None):
        """Builds a transcript message and returns it with the turn it abandons
        (None if none): the session's newer-turn rule applied client-side.
        `context=False`: primd retrieves this turn without its conversation;
        `context_tokens=N`: this turn's `context` budget in word pieces (0: none)."""
        check_session(session)
        check_turn(turn)
        check_context_tokens(context_tokens)
        abandoned = None
        prev = self.newest.get(session)
        if prev is not None and turn < prev:
            raise ValueError(f"turn {turn} of session {session!r} is older than turn {prev}, "
                             "primd would ignore it")
        if prev is not None and turn > prev and (session, prev) not in self.ended:
            abandoned = (session, prev)
        self.newest[session] = turn
        self.newest.move_to_end(session)
        self._bound(self.newest)
        if key in ("final", "end_of_speech"):
            self.ended[(session, turn)] = True
            self._bound(self.ended)
        msg = {"session": session, "turn": turn, key: value}
        if not context:
            msg["context"] = False
        if context_tokens is not None:
            msg["context_tokens"] = context_tokens
        return msg, abandoned

    def close_session(self, session):
        """Forgets a session the client closed; returns its open turn (abandoned by
        the close) or None."""
        turn = self.newest.pop(session, None)
        if turn is not None and (session, turn) not in self.ended:
            return (session, turn)
        return None

    def sent_line(self, msg):
        self.lines_sent += 1
        if "session" in msg and "turn" in msg:
            self.line_turn[self.lines_sent] = (msg["session"], msg["turn"])
            self._bound(self.line_turn)

    def turn_of_error(self, msg):
        """The (session, turn) a transcript's error reply is about, if known."""
        if "session" in msg and "turn" in msg:
            return msg["session"], msg["turn"]
        line = msg.get("line")
        if isinstance(line, int):
            return self.line_turn.get(line)
        return None

    def store_final(self, msg):
        key = (msg.get("session"), msg.get("turn"))
        self.finals[key] = msg
        self._bound(self.finals)
        return key

    def store_failure(self, key, exc):
        self.failed[key] = exc
        self._bound(self.failed)

    def take(self, key):
        """A collected final (removed), or raises the turn's failure, or None."""
        if key in self.finals:
            return self.finals.pop(key)
        if key in self.failed:
            raise self.failed.pop(key)
        return None


def passages_text(result, max_passages=3, max_chars=1200):
    """The passages of a final result as one text for an LLM's context, best first,
    each headed by its title; "" when there are none. Used by the adapters."""
    parts = []
    for r in (result or {}).get("results", [])[:max_passages]:
        text = (r.get("text") or "").strip()
        if len(text) > max_chars:
            text = text[:max_chars].rsplit(" ", 1)[0] + " …"
        title = (r.get("title") or "").strip()
        parts.append(f"[{title}] {text}" if title else text)
    return "\n\n".join(p for p in parts if p.strip())
