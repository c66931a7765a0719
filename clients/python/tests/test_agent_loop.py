"""examples/agent_loop.py end to end, as a user runs it: recognizer lines and a typed
question on stdin, the real `primd run --listen` (demo index, real model), and a local
chat-completions server standing in for llama.cpp or Ollama (chat_server.py). The LLM
gets primd's context as numbered sources and the earlier exchange; the loop prints its
reply with the titles it cites, or, with no LLM, the prompt."""

import json
import os
import subprocess
import sys
import unittest

from chat_server import ChatServer
from primd_client import Client, prompt_messages
from primd_server import SharedPrimd, grow

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(HERE), "examples", "agent_loop.py")
TICKET = "How much is a ticket for a child?"
DOG = "Can I bring my dog inside the museum?"


class AgentLoop(SharedPrimd):
    def run_loop(self, lines, *args):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        r = subprocess.run([sys.executable, EXAMPLE, "--primd", self.primd.address, *args],
                           input="".join(line + "\n" for line in lines), capture_output=True,
                           text=True, env=env, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def expected_prompt(self, question, session):
        """The prompt helper's messages for the daemon's answer to a first turn."""
        with Client.connect(self.primd.address) as c:
            return prompt_messages(c.query(session, 1, question, timeout=60))

    def test_recognizer_lines_and_a_typed_question_reach_the_llm(self):
        stt = [json.dumps({"partial": p, "t": 0.3 * i}) for i, p in enumerate(grow(TICKET))]
        stt.append(json.dumps({"final": TICKET, "t": 3.0}))
        with ChatServer() as llm:
            out = self.run_loop(stt + [DOG], "--llm-url", llm.url, "--model", "tiny",
                                "--session", "loop-llm")
        first, second = llm.requests
        self.assertEqual(first["model"], "tiny")
        self.assertEqual(first["messages"], self.expected_prompt(TICKET, "loop-check"),
                         "the prompt helper's messages for primd's answer")
        self.assertIn("\n[1] Ticket prices: ", first["messages"][0]["content"])
        self.assertEqual([m["role"] for m in second["messages"]],
                         ["system", "user", "assistant", "user"], "the earlier exchange went along")
        self.assertEqual(second["messages"][-1]["content"], DOG)
        self.assertIn(f"user: {TICKET}\nassistant: Reply to {TICKET}, citing [1]\n"
                      "  [1] Ticket prices\n", out)
        self.assertIn(f"user: {DOG}\nassistant: Reply to {DOG}, citing [1]\n", out)

    def test_without_an_llm_it_prints_the_prompt(self):
        out = self.run_loop([TICKET], "--session", "loop-print")
        system, user = self.expected_prompt(TICKET, "loop-print-check")
        self.assertEqual(out, f"--- system\n{system['content']}\n--- user\n{TICKET}\n\n")


if __name__ == "__main__":
    unittest.main()
