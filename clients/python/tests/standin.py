"""A stand-in for AsyncClient that records what an adapter sends and answers finals
like primd would (a result naming the final's text), for testing the adapters' turn
mapping without a server. The same adapters are also run against the real primd in
test_adapters_live.py."""

from primd_client import protocol as p


class StandInClient:
    def __init__(self, answer=True, **verdict):
        self.sent = []  # (kind, session, turn, text)
        self.answer = answer
        self.verdict = verdict  # e.g. evidence="low", confidence=0.1: added to each result
        self.closed = False
        self.router = p.Router()

    async def partial(self, session, turn, text):
        self.router.transcript(session, turn, "partial", text)
        self.sent.append(("partial", session, turn, text))

    async def final(self, session, turn, text):
        self.router.transcript(session, turn, "final", text)
        self.sent.append(("final", session, turn, text))
        if self.answer:
            self.router.store_final({
                "type": "final", "session": session, "turn": turn, "text": text,
                "results": [{"id": "p1", "title": "About " + text, "text": "Passage for " + text}],
                **self.verdict,
            })

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
