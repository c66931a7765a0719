"""The sync and asyncio clients against the real `primd run --listen` (demo index, real
model): two sessions with interleaved turns, an abandoned turn, subscriptions, reload,
stats, errors tied to the turn that caused them, and disconnects on either side."""

import asyncio
import os
import threading
import unittest

from primd_client import (
    AsyncClient,
    Client,
    ConnectionClosed,
    ServerError,
    Timeout,
    TurnAbandoned,
)
from primd_server import Primd, SharedPrimd, grow

DOG = "Can I bring my dog inside the museum?"
TICKET = "How much is a ticket for a child?"
PLANETARIUM = "What time does the planetarium show start?"


def top_id(result):
    return result["results"][0]["id"]


class SharedDaemon(SharedPrimd):
    def connect(self, **kw):
        c = Client.connect(self.primd.address, **kw)
        self.addCleanup(c.close)
        return c


class TwoSessions(SharedDaemon):
    def test_hello(self):
        c = self.connect()
        self.assertEqual(c.hello["protocol"], 1)
        self.assertGreater(c.hello["passages"], 0)
        self.assertGreater(c.ping(), 0)

    def test_interleaved_turns_of_two_sessions_get_their_own_answers(self):
        a, b = self.connect(), self.connect()
        for pa, pb in zip(grow(DOG), grow(TICKET)):
            a.partial("kiosk-a", 1, pa)
            b.partial("kiosk-b", 1, pb)
        b.final("kiosk-b", 1, TICKET)
        a.final("kiosk-a", 1, DOG)
        ra = a.wait_final("kiosk-a", 1, timeout=60)
        rb = b.wait_final("kiosk-b", 1, timeout=60)
        self.assertEqual((ra["session"], ra["turn"], ra["text"]), ("kiosk-a", 1, DOG))
        self.assertEqual((rb["session"], rb["turn"], rb["text"]), ("kiosk-b", 1, TICKET))
        self.assertEqual(top_id(ra), "dogs-and-assistance-animals")
        self.assertEqual(top_id(rb), "ticket-prices")
        # The second turn of a session, after the first ended.
        rb2 = b.query("kiosk-b", 2, PLANETARIUM, timeout=60)
        self.assertEqual((rb2["turn"], top_id(rb2)), (2, "planetarium-shows"))

    def test_end_of_speech_makes_the_newest_partial_the_final(self):
        c = self.connect()
        for p in grow(PLANETARIUM) + [PLANETARIUM]:
            c.partial("eos", 1, p)
        c.end_of_speech("eos", 1)
        r = c.wait_final("eos", 1, timeout=60)
        self.assertEqual(r["text"], PLANETARIUM)
        self.assertEqual(top_id(r), "planetarium-shows")

    def test_a_newer_turn_abandons_the_open_one(self):
        c = self.connect()
        c.partial("ab", 1, "what time does the")
        c.final("ab", 2, TICKET)
        with self.assertRaises(TurnAbandoned):
            c.wait_final("ab", 1, timeout=60)
        self.assertEqual(top_id(c.wait_final("ab", 2, timeout=60)), "ticket-prices")

    def test_session_of_another_connection_is_refused_for_that_turn(self):
        a, b = self.connect(), self.connect()
        a.partial("owned", 1, "how much")
        a.ping()  # a's lines are handled in order: "owned" is a's once the reply is here
        b.final("owned", 1, TICKET)
        with self.assertRaises(ServerError) as e:
            b.wait_final("owned", 1, timeout=60)
        self.assertEqual(e.exception.code, "session_owned")
        self.assertEqual(top_id(a.query("owned", 1, TICKET, timeout=60)), "ticket-prices")

    def test_close_session_abandons_its_turn_and_frees_the_name(self):
        a, b = self.connect(), self.connect()
        a.partial("closing", 1, "how much is a")
        self.assertEqual(a.close_session("closing")["session"], "closing")
        with self.assertRaises(TurnAbandoned):
            a.wait_final("closing", 1, timeout=60)
        # Closed by a's reply, so b may own it now.
        self.assertEqual(top_id(b.query("closing", 1, TICKET, timeout=60)), "ticket-prices")
        with self.assertRaises(ServerError) as e:
            a.close_session("never-opened")
        self.assertEqual(e.exception.code, "unknown_session")

    def test_a_turn_asks_for_its_own_context_budget(self):
        c = self.connect()
        default = c.query("budget", 1, TICKET, timeout=60)["context"]
        self.assertGreater(default["tokens"], 16, "the premise: the daemon's budget is larger")
        small = c.query("budget", 2, TICKET, timeout=60, context_tokens=16)["context"]
        self.assertLessEqual(small["tokens"], 16)
        self.assertNotIn("context", c.query("budget", 3, TICKET, timeout=60, context_tokens=0))

    def test_the_agent_sets_the_topic_by_the_passage_it_used(self):
        c = self.connect()
        c.query("topic", 1, DOG, timeout=60)
        self.assertEqual(c.topic("topic", passage="planetarium-shows"), "Planetarium shows")
        r = c.query("topic", 2, "How much does it cost?", timeout=60)
        self.assertEqual(top_id(r), "planetarium-shows")
        self.assertEqual(r["conversation"]["topic"], "Planetarium shows")
        self.assertIsNone(c.topic("topic"))
        with self.assertRaises(ServerError) as e:
            c.topic("topic", passage="no-such-passage")
        self.assertEqual(e.exception.code, "unknown_passage")

    def test_reserved_session_refused(self):
        c = self.connect()
        c.final("stt", 1, TICKET)
        with self.assertRaises(ServerError) as e:
            c.wait_final("stt", 1, timeout=60)
        self.assertEqual(e.exception.code, "reserved_session")
        self.assertGreater(c.ping(), 0, "the connection stays open")

    def test_oversized_message_refused_before_sending(self):
        c = self.connect()
        with self.assertRaises(ValueError):
            c.final("big", 1, "word " * 20000)
        self.assertEqual(top_id(c.query("big", 2, DOG, timeout=60)), "dogs-and-assistance-animals")

    def test_subscriber_of_all_sessions_sees_another_clients_final(self):
        watcher, speaker = self.connect(), self.connect()
        self.assertEqual(watcher.subscribe("*")["session"], "*")
        speaker.query("watched", 1, DOG, timeout=60)
        while True:
            msg = watcher.next_result(timeout=60)
            if msg["type"] == "final" and msg["session"] == "watched":
                break
        self.assertEqual((msg["turn"], top_id(msg)), (1, "dogs-and-assistance-animals"))
        watcher.unsubscribe("*")

    def test_speculative_lines_for_own_session_when_asked(self):
        got = []
        c = self.connect(on_result=got.append)
        c.subscribe("spec", speculative=True)
        c.partial("spec", 1, "can I bring my dog inside the museum")
        while not any(m["type"] == "speculative" for m in got):
            c.next_result(timeout=60)  # raises Timeout if primd never speculates
        spec = next(m for m in got if m["type"] == "speculative")
        self.assertEqual((spec["session"], spec["turn"]), ("spec", 1))
        self.assertIn("dogs-and-assistance-animals", [x["id"] for x in spec["candidates"]])
        c.final("spec", 1, DOG)
        self.assertEqual(top_id(c.wait_final("spec", 1, timeout=60)), "dogs-and-assistance-animals")

    def test_stats_and_reload(self):
        c = self.connect()
        before = c.stats()
        c.query("st", 1, TICKET, timeout=60)
        after = c.stats()
        self.assertGreaterEqual(after["utterances"], before["utterances"] + 1)
        self.assertGreaterEqual(after["clients"], 1)
        self.assertEqual(after["index"]["passages"], c.hello["passages"])
        reply = c.reload()
        self.assertEqual(reply["passages"], c.hello["passages"])
        self.assertEqual(top_id(c.query("st", 2, DOG, timeout=60)), "dogs-and-assistance-animals")

    def test_a_client_gone_mid_turn_does_not_disturb_another(self):
        gone, stays = self.connect(), self.connect()
        for p in grow(PLANETARIUM):
            gone.partial("gone", 1, p)
        gone.close()
        with self.assertRaises(ConnectionClosed):
            gone.final("gone", 1, PLANETARIUM)
        self.assertEqual(top_id(stays.query("stays", 1, PLANETARIUM, timeout=60)), "planetarium-shows")
        # The session is freed with its connection (once primd has seen the close,
        # which may take a moment: until then it is refused as owned).
        again = self.connect()
        turn = 2
        while True:
            try:
                result = again.query("gone", turn, DOG, timeout=60)
                break
            except ServerError as e:
                self.assertEqual(e.code, "session_owned")
                self.assertLess(turn, 10000, "the session was never freed")
                again.stats()  # a round trip, then ask again
                turn += 1
        self.assertEqual(top_id(result), "dogs-and-assistance-animals")

    def test_async_client(self):
        async def go():
            a = await AsyncClient.connect(self.primd.address)
            b = await AsyncClient.connect(self.primd.address)
            try:
                for pa, pb in zip(grow(DOG), grow(TICKET)):
                    await a.partial("async-a", 7, pa)
                    await b.partial("async-b", 3, pb)
                await a.final("async-a", 7, DOG)
                await b.final("async-b", 3, TICKET)
                ra, rb = await asyncio.gather(a.wait_final("async-a", 7, 60), b.wait_final("async-b", 3, 60))
                stats = await a.stats()
                with self.assertRaises(Timeout):
                    await a.wait_final("async-a", 8, timeout=0.2)  # never sent
                return ra, rb, stats, await a.ping()
            finally:
                await a.close()
                await b.close()

        ra, rb, stats, rtt = asyncio.run(go())
        self.assertEqual((ra["turn"], top_id(ra)), (7, "dogs-and-assistance-animals"))
        self.assertEqual((rb["turn"], top_id(rb)), (3, "ticket-prices"))
        self.assertIn("utterances", stats)
        self.assertGreater(rtt, 0)


class OwnDaemon(unittest.TestCase):
    def test_primd_gone_wakes_the_waiting_call_with_connection_closed(self):
        with Primd() as p:
            c = Client.connect(p.address)
            c.partial("k", 1, "what time does the")
            failed = []
            t = threading.Thread(target=lambda: failed.append(_expect_closed(c)))
            t.start()
            p.proc.kill()
            t.join(120)
            self.assertEqual(failed, [True])
            with self.assertRaises(ConnectionClosed):
                c.ping()
            c.close()

    def test_async_waiter_woken_by_disconnect(self):
        with Primd() as p:
            async def go():
                c = await AsyncClient.connect(p.address)
                await c.partial("k", 1, "what time")
                waiter = asyncio.ensure_future(c.wait_final("k", 1, timeout=120))
                await asyncio.sleep(0)
                p.proc.kill()
                with self.assertRaises(ConnectionClosed):
                    await waiter
                self.assertTrue(c.closed)
                await c.close()
            asyncio.run(go())

    def test_invalid_index_on_reload_is_refused_and_the_old_one_serves(self):
        with Primd() as p:
            c = Client.connect(p.address)
            with open(p.index, "rb") as f:
                good = f.read()
            tmp = p.index + ".new"
            with open(tmp, "wb") as f:
                f.write(b"not an index" * 100)
            os.replace(tmp, p.index)
            with self.assertRaises(ServerError) as e:
                c.reload()
            self.assertEqual(e.exception.code, "reload_failed")
            self.assertEqual(top_id(c.query("r", 1, DOG, timeout=60)), "dogs-and-assistance-animals")
            with open(tmp, "wb") as f:
                f.write(good)
            os.replace(tmp, p.index)
            self.assertEqual(c.reload()["passages"], c.hello["passages"])
            c.close()


def _expect_closed(client):
    try:
        client.wait_final("k", 1, timeout=120)
    except ConnectionClosed:
        return True
    except Exception as e:  # noqa: BLE001 - reported by the assertion
        return repr(e)
    return "answered"


if __name__ == "__main__":
    unittest.main()
