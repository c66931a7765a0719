"""`result.context` from the real `primd run --listen` (real model), through the sync and
the asyncio client: every span's text is where its offsets say in its passage, the
prompt cites the passages' titles, an empty final is safe, and the prompt helper's token
estimate does not undercount primd's own word pieces (so the default 128-piece context
fits the default cap uncut). The test index (tests/data/demo-x86.idx) predates sentences
(`unit: "passages"`); the index `demo/run` builds has them, so `Sentences` builds one
like it (the demo questions' documents) with the `build-index` next to primd (cargo
builds both) and checks it too."""

import asyncio
import json
import os
import subprocess
import tempfile
import unittest

from primd_client import AsyncClient, Client, Context, estimate_tokens, prompt_messages, sources
from primd_client.prompt import NO_SOURCES
from primd_server import MODEL, ROOT, Primd, SharedPrimd, primd_bin

TICKET = "How much is a ticket for a child?"


def demo_questions():
    with open(os.path.join(ROOT, "demo", "questions.jsonl")) as f:
        return [json.loads(line)["final"] for line in f if line.strip()]


def check(test, result, unit):
    """What every context must satisfy: spans where their offsets say, a best span, an
    estimate within 10% of primd's word pieces or above (an estimate without a
    tokenizer: "What time does the planetarium show start?" got 79 for 81 pieces), and
    sources uncut by the default cap."""
    ctx = result.context
    test.assertIsInstance(ctx, Context)
    test.assertEqual(ctx.unit, unit)
    passages = {(r["id"], r.get("chunk", 0)): r["text"] for r in result["results"]}
    for span in ctx.spans:
        test.assertEqual(passages[(span.passage, span.chunk)][span.start:span.end], span.text)
    test.assertIn(ctx.best_span, ctx.spans)
    test.assertGreaterEqual(estimate_tokens(ctx.text) * 1.1, ctx.tokens, result["text"])
    test.assertEqual([s.text for s in sources(result)],
                     [" ".join(t.split()) for _, t in ctx.passages()],
                     f"{result['text']}: cut by the default cap")
    return ctx


class ContextLive(SharedPrimd):
    def check_spans(self, result):
        return check(self, result, "passages")  # the test index predates sentences

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

    def test_every_demo_question(self):
        with Client.connect(self.primd.address) as c:
            for turn, q in enumerate(demo_questions(), 1):
                self.check_spans(c.query("ctx-demo", turn, q, timeout=60, context=False))


class Sentences(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        build_index = os.path.join(os.path.dirname(primd_bin()), "build-index")
        if not os.access(build_index, os.X_OK):
            raise unittest.SkipTest(f"no {build_index} (cargo test --workspace builds it)")
        # The documents of the demo questions only: embedding all 52 takes a debug
        # build-index a minute and a half.
        cls.tmp = tempfile.TemporaryDirectory()
        corpus, index = (os.path.join(cls.tmp.name, name) for name in ("corpus.jsonl", "demo.idx"))
        with open(os.path.join(ROOT, "demo", "questions.jsonl")) as f:
            wanted = {json.loads(line)["expected_id"] for line in f if line.strip()}
        with open(os.path.join(ROOT, "demo", "corpus.jsonl")) as f, open(corpus, "w") as out:
            out.writelines(line for line in f if line.strip() and json.loads(line)["id"] in wanted)
        subprocess.run([build_index, "--quiet", "--model", MODEL, "--output", index,
                        "--input", corpus], check=True, capture_output=True, timeout=600)
        cls.primd = Primd(index=index)

    @classmethod
    def tearDownClass(cls):
        cls.primd.stop()
        cls.tmp.cleanup()

    def test_the_context_is_sentences_and_the_prompt_smaller_than_with_passages(self):
        with Client.connect(self.primd.address) as c:
            for turn, q in enumerate(demo_questions(), 1):
                result = c.query("sentences", turn, q, timeout=60, context=False)
                check(self, result, "sentences")
                with_context = estimate_tokens(prompt_messages(result)[0]["content"])
                with_passages = estimate_tokens(
                    prompt_messages(result, evidence="passages")[0]["content"])
                self.assertLess(with_context, with_passages, q)


if __name__ == "__main__":
    unittest.main()
