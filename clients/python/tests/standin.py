"""A stand-in for AsyncClient that records what an adapter sends and answers finals
like primd would (a result naming the final's text: one passage, and a `context` that
holds its second sentence only, as primd's sentence ranking would), for testing the
adapters' turn mapping without a server. The same adapters are also run against the
real primd in test_adapters_live.py."""

from primd_client import protocol as p


FILLER = "Filler about the museum."


def final_result(text, context=True):
    """primd's final for `text`: passage "Filler about the museum. Answer for TEXT."
    titled "About TEXT"; its context (unless `context=False`, primd's
    `--context-tokens 0`) is the second sentence."""
    sentence = f"Answer for {text}."
    passage = f"{FILLER} {sentence}"
    result = {"type": "final", "text": text, "evidence": "ok",
              "results": [{"id": "p1", "chunk": 0, "title": "About " + text, "text": passage}]}
    if context:
        start = len(FILLER) + 1
        result["context"] = {"text": sentence, "tokens": len(sentence.split()) + 1,
                             "unit": "sentences", "best": 0,
                             "spans": [{"passage": "p1", "chunk": 0, "start": start,
                                        "end": start + len(sentence)}]}
    return result


class StandInClient:
    def __init__(self, answer=True, context=True, **verdict):
        self.sent = []  # (kind, session, turn, text)
        self.budgets = []  # each final's context_tokens
        self.answer = answer
        self.context = context
        self.verdict = verdict  # e.g. evidence="low", confidence=0.1: added to each result
        self.closed = False
        self.router = p.Router()

    async def partial(self, session, turn, text):
        self.router.transcript(session, turn, "partial", text)
        self.sent.append(("partial", session, turn, text))

    async def final(self, session, turn, text, context_tokens=None):
        self.router.transcript(session, turn, "final", text, context_tokens=context_tokens)
        self.sent.append(("final", session, turn, text))
        self.budgets.append(context_tokens)
        if self.answer:
            self.router.store_final(p.Result(
                {**final_result(text, self.context), "session": session, "turn": turn, **self.verdict}))

    async def topic(self, session, text=None, passage=None):
        self.sent.append(("topic", session, None, text if passage is None else passage))
        return text if passage is None else "Title of " + passage

    def result_ready(self, session, turn):
        return (session, turn) in self.router.finals

    async def wait_final(self, session, turn, timeout=5.0):
        got = self.router.take((session, turn))
        if got is None:
            raise p.Timeout("stand-in: no answer")
        return got

    async def close(self):
        self.closed = True
