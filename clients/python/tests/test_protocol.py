"""The client's wire rules and turn bookkeeping, without a server: addresses, framing
limits, the hello check, which turn an error reply or a newer turn fails."""

import unittest

from primd_client import protocol as p


class Addresses(unittest.TestCase):
    def test_unix_and_tcp(self):
        self.assertEqual(p.parse_address("unix:/run/primd/primd.sock"), ("unix", "/run/primd/primd.sock"))
        self.assertEqual(p.parse_address("tcp:127.0.0.1:7700"), ("tcp", ("127.0.0.1", 7700)))
        self.assertEqual(p.parse_address("tcp:[::1]:7700"), ("tcp", ("::1", 7700)))

    def test_bad_addresses_are_clear_errors(self):
        for bad in ["", "unix:", "tcp:host", "tcp:host:0", "tcp:host:99999", "http://x", None]:
            with self.assertRaises(ValueError, msg=bad):
                p.parse_address(bad)


class Framing(unittest.TestCase):
    def test_lines_split_across_reads(self):
        buf = p.LineBuffer(100)
        self.assertEqual(buf.feed(b'{"a":1}\n{"b"'), [b'{"a":1}'])
        self.assertEqual(buf.feed(b':2}\n'), [b'{"b":2}'])
        self.assertEqual(buf.feed(b''), [])

    def test_line_over_the_limit_is_refused_even_without_newline(self):
        with self.assertRaises(p.ProtocolError):
            p.LineBuffer(10).feed(b"x" * 11)
        with self.assertRaises(p.ProtocolError):
            p.LineBuffer(10).feed(b"x" * 11 + b"\n")
        self.assertEqual(p.LineBuffer(10).feed(b"x" * 10 + b"\n"), [b"x" * 10])

    def test_encode_refuses_what_primd_would_refuse(self):
        line = p.encode({"session": "s", "turn": 1, "partial": "é"}, 65536)
        self.assertTrue(line.endswith(b"\n"))
        self.assertEqual(p.decode(line[:-1])["partial"], "é")
        with self.assertRaises(ValueError):
            p.encode({"partial": "x" * 70000}, 65536)

    def test_decode(self):
        self.assertEqual(p.decode(b'{"type":"hello"}\r'), {"type": "hello"})
        for bad in [b"not json", b"[1,2]", b"\xff\xfe"]:
            with self.assertRaises(p.ProtocolError):
                p.decode(bad)

    def test_hello_version(self):
        self.assertEqual(p.check_hello({"type": "hello", "protocol": 1})["protocol"], 1)
        with self.assertRaises(p.ProtocolError):
            p.check_hello({"type": "hello", "protocol": 2})
        with self.assertRaises(p.ProtocolError):
            p.check_hello({"type": "final"})


class Turns(unittest.TestCase):
    def test_newer_turn_abandons_an_open_one_but_not_an_ended_one(self):
        r = p.Router()
        _, ab = r.transcript("s", 1, "partial", "a")
        self.assertIsNone(ab)
        _, ab = r.transcript("s", 2, "partial", "b")
        self.assertEqual(ab, ("s", 1))
        _, ab = r.transcript("s", 2, "final", "b c")
        self.assertIsNone(ab)
        _, ab = r.transcript("s", 3, "partial", "d")
        self.assertIsNone(ab, "turn 2 ended with its final, so it is not abandoned")
        _, ab = r.transcript("other", 9, "partial", "x")
        self.assertIsNone(ab, "sessions are independent")

    def test_context_false_is_sent_only_when_asked(self):
        r = p.Router()
        msg, _ = r.transcript("s", 1, "final", "when was the museum built")
        self.assertNotIn("context", msg)
        msg, _ = r.transcript("s", 2, "final", "who designed it", context=False)
        self.assertIs(msg["context"], False)
        _, cmd = r.command("reset", session="s")
        self.assertEqual((cmd["cmd"], cmd["session"]), ("reset", "s"))

    def test_a_turns_context_budget_is_sent_only_when_asked_and_checked(self):
        r = p.Router()
        msg, _ = r.transcript("s", 1, "final", "when was the museum built")
        self.assertNotIn("context_tokens", msg)
        msg, _ = r.transcript("s", 2, "final", "who designed it", context_tokens=64)
        self.assertEqual(msg["context_tokens"], 64)
        for bad in (-1, 1.5, "64", True, 1_000_001):
            with self.assertRaises(ValueError, msg=repr(bad)):
                r.transcript("s", 3, "final", "x", context_tokens=bad)

    def test_closing_a_session_abandons_its_open_turn_and_frees_the_name(self):
        r = p.Router()
        r.transcript("s", 4, "partial", "a")
        self.assertEqual(r.close_session("s"), ("s", 4))
        _, ab = r.transcript("s", 1, "partial", "a")  # lower turn fine: a new session
        self.assertIsNone(ab)
        r.transcript("s", 1, "final", "a b")
        self.assertIsNone(r.close_session("s"), "an ended turn is not abandoned")

    def test_older_turn_and_bad_arguments_refused_before_sending(self):
        r = p.Router()
        r.transcript("s", 5, "partial", "a")
        with self.assertRaises(ValueError):
            r.transcript("s", 4, "partial", "a")
        for session, turn in [("", 1), ("x" * 65, 1), (None, 1), ("s", -1), ("s", 1.5), ("s", True)]:
            with self.assertRaises(ValueError):
                p.Router().transcript(session, turn, "partial", "a")

    def test_error_reply_names_the_turn_of_its_line(self):
        r = p.Router()
        for msg in [{"cmd": "ping", "id": 1}, {"session": "a", "turn": 3, "final": "x"}]:
            r.sent_line(msg)
        self.assertIsNone(r.turn_of_error({"type": "error", "line": 1}))
        self.assertEqual(r.turn_of_error({"type": "error", "line": 2}), ("a", 3))
        self.assertEqual(r.turn_of_error({"type": "error", "session": "b", "turn": 4}), ("b", 4))
        self.assertIsNone(r.turn_of_error({"type": "error"}))

    def test_state_is_bounded(self):
        r = p.Router(keep=8)
        for t in range(100):
            msg, _ = r.transcript("s", t, "final", "x")
            r.sent_line(msg)
            r.store_final({"type": "final", "session": "s", "turn": t})
        self.assertEqual(len(r.finals), 8)
        self.assertEqual(len(r.line_turn), 8)
        self.assertEqual(len(r.ended), 8)
        for s in range(100):
            r.transcript(f"session-{s}", 1, "partial", "x")
        self.assertEqual(len(r.newest), 8, "one entry per recent session, not per session ever")
        self.assertIsNone(r.take(("s", 0)), "the oldest uncollected final was dropped")
        self.assertEqual(r.take(("s", 99))["turn"], 99)
        self.assertIsNone(r.take(("s", 99)), "a final is collected once")

    def test_failure_is_raised_once(self):
        r = p.Router()
        r.store_failure(("s", 1), p.TurnAbandoned("x"))
        with self.assertRaises(p.TurnAbandoned):
            r.take(("s", 1))
        self.assertIsNone(r.take(("s", 1)))


class Passages(unittest.TestCase):
    def test_passages_text_orders_titles_and_cuts_long_text(self):
        result = {"results": [
            {"title": "Opening hours", "text": "Open 10 to 17.30."},
            {"title": "", "text": "word " * 400},
            {"title": "Third", "text": "three"},
            {"title": "Fourth", "text": "four"},
        ]}
        text = p.passages_text(result, max_passages=3, max_chars=100)
        self.assertTrue(text.startswith("[Opening hours] Open 10 to 17.30."))
        self.assertIn("[Third] three", text)
        self.assertNotIn("Fourth", text)
        self.assertLess(len(text), 300)
        self.assertEqual(p.passages_text({"results": []}), "")
        self.assertEqual(p.passages_text(None), "")


if __name__ == "__main__":
    unittest.main()
