"""The adapters' shared turn mapping (TurnFeeder) against a recording stand-in: what a
framework's interim and final transcripts become on the wire, and what it gets back."""

import asyncio
import unittest

from primd_client.turns import HEADER, TurnFeeder, context_text
from standin import StandInClient


def run(coro):
    return asyncio.run(coro)


class TurnMapping(unittest.TestCase):
    def test_segments_of_one_user_turn_accumulate(self):
        async def go():
            c = StandInClient()
            f = TurnFeeder("unix:/nowhere", "s", client=c)
            await f.interim("what time")
            await f.interim("what time does the museum")
            t0 = await f.final("What time does the museum open")
            await f.interim("on sunday")
            t1 = await f.final("on Sunday?")
            res = await f.result(t1)
            f.end_user_turn()
            await f.interim("thanks")
            return c.sent, t0, t1, res

        sent, t0, t1, res = run(go())
        self.assertEqual((t0, t1), (0, 1))
        self.assertEqual(sent, [
            ("partial", "s", 0, "what time"),
            ("partial", "s", 0, "what time does the museum"),
            ("final", "s", 0, "What time does the museum open"),
            ("partial", "s", 1, "What time does the museum open on sunday"),
            ("final", "s", 1, "What time does the museum open on Sunday?"),
            ("partial", "s", 2, "thanks"),
        ])
        self.assertEqual(res["text"], "What time does the museum open on Sunday?")

    def test_the_agent_tells_primd_its_topic(self):
        async def go():
            c = StandInClient()
            f = TurnFeeder("unix:/nowhere", "s", client=c)
            kept = await f.topic(passage="planetarium-shows")
            cleared = await f.topic()
            return c.sent, kept, cleared

        sent, kept, cleared = run(go())
        self.assertEqual(sent, [("topic", "s", None, "planetarium-shows"),
                                ("topic", "s", None, None)])
        self.assertEqual((kept, cleared), ("Title of planetarium-shows", None))

    def test_blank_transcripts_send_nothing(self):
        async def go():
            c = StandInClient()
            f = TurnFeeder("unix:/nowhere", "s", client=c)
            await f.interim("  ")
            self.assertIsNone(await f.final(""))
            return c.sent
        self.assertEqual(run(go()), [])

    def test_result_for_text_reuses_the_answered_final_or_asks_anew(self):
        async def go():
            c = StandInClient()
            f = TurnFeeder("unix:/nowhere", "s", client=c)
            await f.final("Where is the cloakroom?")
            ready = f.ready()
            same = await f.result_for_text("where is the  cloakroom?")
            n_same = len(c.sent)
            f.end_user_turn()
            await f.final("where are the toilets")
            other = await f.result_for_text("Where are the toilets and the lifts?")
            return ready, same, n_same, other, c.sent

        ready, same, n_same, other, sent = run(go())
        self.assertTrue(ready)
        self.assertEqual(same["turn"], 0)
        self.assertEqual(n_same, 1, "the framework's turn text matched: nothing re-sent")
        self.assertEqual(sent[-1], ("final", "s", 2, "Where are the toilets and the lifts?"))
        self.assertEqual(other["text"], "Where are the toilets and the lifts?")

    def test_no_answer_gives_none_not_an_exception(self):
        async def go():
            f = TurnFeeder("unix:/nowhere", "s", client=StandInClient(answer=False))
            with self.assertLogs("primd_client", "WARNING"):
                return await f.result(await f.final("hello"))
        self.assertIsNone(run(go()))

    def test_unreachable_primd_is_logged_and_the_agent_goes_on(self):
        async def go():
            f = TurnFeeder("unix:/nonexistent/primd.sock", "s", retry_s=60)
            with self.assertLogs("primd_client", "WARNING"):
                await f.interim("hello")
            turn = await f.final("hello there")
            return turn, await f.result(turn), f.errors
        turn, res, errors = run(go())
        self.assertIsNone(turn)
        self.assertIsNone(res)
        self.assertEqual(errors, 1, "one failed connect; the next waits for retry_s")

    def test_a_context_budget_goes_with_every_final(self):
        async def go(**options):
            c = StandInClient()
            f = TurnFeeder("unix:/nowhere", "s", client=c, **options)
            await f.interim("is there a")
            await f.final("Is there a cafe?")
            await f.final("And a shop?")
            return c.budgets
        self.assertEqual(run(go(context_tokens=32)), [32, 32])
        self.assertEqual(run(go()), [None, None], "primd's own budget unless asked")
        with self.assertRaises(ValueError):
            TurnFeeder("unix:/nowhere", "s", context_tokens=-1)

    def test_context_text(self):
        self.assertIsNone(context_text({"results": []}))
        text = context_text({"results": [{"title": "T", "text": "body"}]})
        self.assertTrue(text.startswith(HEADER))
        self.assertIn("[T] body", text)


if __name__ == "__main__":
    unittest.main()
