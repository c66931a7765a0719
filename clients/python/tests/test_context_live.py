"""`result.context` from the real `primd run --listen` (demo index, real model), through
the sync and the asyncio client: every span's text is where its offsets say in its
passage, the prompt cites the passages' titles, an empty final is safe, and the prompt
helper's token estimate does not undercount primd's own word pieces (so the default
128-piece context fits the default cap uncut)."""

import asyncio
import json
import os
import unittest

from primd_client import AsyncClient, Client, Context, estimate_tokens, prompt_messages, sources
from primd_client.prompt import NO_SOURCES
from primd_server import ROOT, SharedPrimd

TICKET = "How much is a ticket for a child?"


def demo_questions():
    with open(os.path.join(ROOT, "demo", "questions.jsonl")) as f:
        return [json.loads(line)["final"] for line in f if line.strip()]


class ContextLive(SharedPrimd):
    def check_spans(self, result):
        ctx = result.context
        self.assertIsInstance(ctx, Context)
        self.assertIn(ctx.unit, ("sentences", "passages"))  # the test index: "passages"
        passages = {(r["id"], r.get("chunk", 0)): r["text"] for r in result["results"]}
        for span in ctx.spans:
            self.assertEqual(passages[(span.passage, span.chunk)][span.start:span.end], span.text)
        self.assertIn(ctx.best_span, ctx.spans)
        return ctx

    def test_sync_and_async_results_have_a_typed_context(self):
        with Client.connect(self.primd.address) as c:
            ctx = self.check_spans(c.query("ctx-sync", 1, TICKET, timeout=60))

        async def go():
            async with await AsyncClient.connect(self.primd.address) as a:
                return await a.query("ctx-async", 1, TICKET, timeout=60)
        result = asyncio.run(go())
        self.assertEqual(self.check_spans(result), ctx, "the same context either way")
        self.assertEqual(ctx.spans[0].passage, "ticket-prices")
        system = prompt_messages(result)[0]["content"]
        self.assertIn("\n[1] Ticket prices: " + ctx.passages()[0][1], system)

    def test_an_empty_final_gives_a_prompt_without_sources(self):
        with Client.connect(self.primd.address) as c:
            result = c.query("ctx-empty", 1, "", timeout=60)
        self.assertTrue(result.context is None or result.context.best_span is None)
        self.assertEqual(sources(result), [])
        self.assertIn(NO_SOURCES, prompt_messages(result)[0]["content"])

    def test_the_estimate_does_not_undercount_primds_word_pieces(self):
        with Client.connect(self.primd.address) as c:
            for turn, q in enumerate(demo_questions(), 1):
                result = c.query("ctx-estimate", turn, q, timeout=60, context=False)
                ctx = result.context
                self.assertGreaterEqual(estimate_tokens(ctx.text), ctx.tokens, q)
                self.assertEqual([s.text for s in sources(result)],
                                 [" ".join(t.split()) for _, t in ctx.passages()],
                                 f"{q}: cut by the default cap")

if __name__ == "__main__":
    unittest.main()
