"""From a primd result to an LLM's answer without a daemon: `result.context` parsed as
primd writes it (docs/context.md), the prompt helper's sources, citations, low-evidence
instruction and token cap, and the chat-completions call against a local stand-in
server (chat_server.py). test_agent_loop.py runs the same path with the real primd."""

import asyncio
import json
import socket
import unittest

from chat_server import ChatServer
from primd_client import LLMError, achat, build_prompt, chat, estimate_tokens, prompt_messages
from primd_client import protocol as p
from primd_client.prompt import LOW_EVIDENCE, NO_SOURCES, cited, sources, sources_text

# A final as primd writes it (the shape of src/wyoming/backend.rs's test line): two
# sentences of passage "a", one of "b"; offsets count characters, not bytes ("ü").
LINE = json.dumps({
    "type": "final", "session": "k", "turn": 1, "text": "what is the capital",
    "evidence": "ok", "confidence": 0.9,
    "results": [
        {"id": "a", "chunk": 0, "title": "Zürich", "text": "Zürich is big. Old town. The capital is Bern."},
        {"id": "b", "chunk": 0, "title": "Bern", "text": "Bern is the federal city."}],
    "context": {"text": "Zürich is big. The capital is Bern.\nBern is the federal city.",
                "tokens": 15, "unit": "sentences", "best": 1,
                "spans": [{"passage": "a", "chunk": 0, "start": 0, "end": 14},
                          {"passage": "a", "chunk": 0, "start": 25, "end": 45},
                          {"passage": "b", "chunk": 0, "start": 0, "end": 25}]},
}, ensure_ascii=False).encode("utf-8")


def final(**fields):
    result = p.decode(LINE)
    result.update(fields)
    return result


class TypedContext(unittest.TestCase):
    def test_a_final_line_has_a_typed_context(self):
        ctx = final().context
        self.assertEqual((ctx.tokens, ctx.unit), (15, "sentences"))
        self.assertEqual([s.text for s in ctx.spans],
                         ["Zürich is big.", "The capital is Bern.", "Bern is the federal city."])
        self.assertEqual(ctx.best_span.text, "The capital is Bern.")
        self.assertEqual(ctx.passages(), [(("a", 0), "Zürich is big. The capital is Bern."),
                                          (("b", 0), "Bern is the federal city.")])

    def test_no_context_and_an_empty_one_are_safe(self):
        self.assertIsNone(final(context=None).context)
        # What an empty final gets on the socket today (issue 52): best 0, no spans.
        empty = final(text="", path="empty", results=[],
                      context={"text": "", "tokens": 0, "unit": "sentences", "best": 0, "spans": []})
        self.assertIsNone(empty.context.best_span, "no span to point at: no best")
        self.assertEqual(sources(empty), [])
        self.assertIn(NO_SOURCES, prompt_messages(empty)[0]["content"])
        self.assertIsNone(p.decode(b'{"type":"speculative","candidates":[]}').context)


class Prompt(unittest.TestCase):
    def test_sources_are_the_context_numbered_with_the_titles(self):
        system, user = prompt_messages(final())
        self.assertEqual(user, {"role": "user", "content": "what is the capital"})
        self.assertIn("Sources:\n[1] Zürich: Zürich is big. The capital is Bern.\n"
                      "[2] Bern: Bern is the federal city.", system["content"])
        self.assertNotIn("Old town", system["content"], "the context, not the passages")
        self.assertNotIn(LOW_EVIDENCE, system["content"])
        self.assertEqual(system["role"], "system")

    def test_low_evidence_is_marked_dropped_or_kept(self):
        low = final(evidence="low", confidence=0.1)
        marked = build_prompt(low)
        self.assertTrue(marked.low_evidence)
        self.assertIn(LOW_EVIDENCE + "\n\nSources:\n[1] Zürich", marked.messages[0]["content"])
        dropped = prompt_messages(low, low_evidence="drop")[0]["content"]
        self.assertIn(NO_SOURCES, dropped)
        self.assertNotIn("Zürich", dropped)
        self.assertNotIn(LOW_EVIDENCE, prompt_messages(low, low_evidence="keep")[0]["content"])
        self.assertIn(LOW_EVIDENCE, prompt_messages(final(), min_confidence=0.95)[0]["content"],
                      "the caller's own threshold")
        self.assertIn(NO_SOURCES, prompt_messages(final(results=[], context=None))[0]["content"])

    def test_the_cap_cuts_the_sources(self):
        full = sources(final(), None)
        capped = sources(final(), 12)
        self.assertLessEqual(estimate_tokens(sources_text(capped)), 12)
        self.assertEqual(len(capped), 1, "the second source left out")
        self.assertTrue(capped[0].text.endswith(" …"), capped[0].text)
        self.assertTrue(full[0].text.startswith(capped[0].text[:-2]))

    def test_without_context_the_passages_are_cut_to_the_cap(self):
        words = " ".join(f"word{i:02}" for i in range(60))  # 60 words, 419 characters
        result = final(context=None, results=[{"id": f"p{i}", "title": f"T{i}", "text": words}
                                              for i in range(3)])
        found = sources(result, 200)
        self.assertEqual([s.title for s in found], ["T0", "T1"], "the third left out")
        self.assertEqual(found[0].text, words)
        self.assertTrue(found[1].text.startswith("word00 word01") and found[1].text.endswith(" …"))
        self.assertLessEqual(estimate_tokens(sources_text(found)), 200)
        self.assertGreater(estimate_tokens(sources_text(found)), 190, "the cap is used, not wasted")
        self.assertEqual(len(sources(result, None)), 3, "no cap: the top three")
        # An index built before format 6: the context is whole passages, cut the same way.
        text = "First line of a passage.\nSecond line. " + words
        old = final(context={"text": text, "tokens": 300, "unit": "passages", "best": 0,
                             "spans": [{"passage": "a", "chunk": 0, "start": 0, "end": len(text)}]})
        self.assertEqual(old.context.spans[0].text, text, "a line break inside one passage")
        (only,) = sources(old, 100)
        self.assertEqual(only.title, "Zürich")
        self.assertTrue(only.text.startswith("First line of a passage. Second line. word00"))
        self.assertLessEqual(estimate_tokens(only.line()), 100)

    def test_history_and_question_and_citations(self):
        history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        built = build_prompt(final(), "and the capital?", history=history)
        self.assertEqual([m["role"] for m in built.messages], ["system", "user", "assistant", "user"])
        self.assertEqual(built.messages[-1]["content"], "and the capital?")
        self.assertEqual([s.title for s in cited("Bern [2], see also [1] and [7].", built.sources)],
                         ["Bern", "Zürich"])

    def test_estimate(self):
        self.assertEqual(estimate_tokens("open 10:30 to 17:00"), 8, "numbers count piece by piece")
        self.assertEqual(estimate_tokens("x" * 400), 100, "one per 4 characters")
        self.assertEqual(estimate_tokens(""), 0)


class ChatCompletions(unittest.TestCase):
    def test_the_prompt_goes_to_the_server_and_the_reply_comes_back(self):
        with ChatServer() as llm:
            messages = prompt_messages(final())
            reply = chat(llm.url, messages, model="qwen2.5:0.5b", temperature=0)
            self.assertEqual(reply, "Reply to what is the capital, citing [1]")
            self.assertEqual(llm.requests, [{"model": "qwen2.5:0.5b", "messages": messages,
                                             "temperature": 0}])
            # The full endpoint URL works too, and so does asyncio.
            again = asyncio.run(achat(llm.url + "/chat/completions/", messages))
            self.assertEqual(again, reply)
            self.assertNotIn("model", llm.requests[1], "no model: the server's own")

    def test_errors_say_what_went_wrong(self):
        with ChatServer(status=503) as llm:
            with self.assertRaisesRegex(LLMError, "HTTP 503.*overloaded"):
                chat(llm.url, [{"role": "user", "content": "hi"}])
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with self.assertRaises(LLMError):
            chat(f"http://127.0.0.1:{port}/v1", [{"role": "user", "content": "hi"}], timeout=5)


if __name__ == "__main__":
    unittest.main()
