#!/usr/bin/env python3
"""A voice agent's loop in one file: recognizer lines or typed questions → primd → a
prompt with primd's `context` and numbered citations → an LLM → the reply. Standard
library only; without `--llm-url` it prints the prompt instead of sending it.

Input on stdin, one line each: a recognizer's JSON lines as `primd run` reads them
(`{"partial": "..."}`, the hypothesis so far; `{"final": "..."}`, which ends the turn)
or any other line as a typed question. From the repository's root:

    demo/run    # once: builds target/release/primd and index/demo.idx (the museum demo)
    target/release/primd run --listen unix:/tmp/primd.sock --index index/demo.idx --input none &
    echo "Can I bring my dog inside?" | PYTHONPATH=clients/python \\
        python3 clients/python/examples/agent_loop.py --primd unix:/tmp/primd.sock
    # with a local LLM: llama.cpp's server, or Ollama (--model names one it has pulled)
    ... agent_loop.py --primd unix:/tmp/primd.sock --llm-url http://127.0.0.1:8080/v1
    ... agent_loop.py --primd unix:/tmp/primd.sock --llm-url http://127.0.0.1:11434/v1 --model qwen2.5:1.5b
    # a recognizer (tools/stt/bridge.py, docs/stt.md: the microphone, or a recording)
    tools/stt/bridge.py --wav q.wav | PYTHONPATH=clients/python python3 clients/python/examples/agent_loop.py ...

Partials go to primd as they come, so it has searched by the time the final arrives;
the earlier exchanges (`--history`) go to the LLM with each prompt, and primd keeps the
conversation for retrieval itself (docs/conversations.md).
"""

import argparse
import json
import os
import sys

from primd_client import Client, LLMError, build_prompt, chat
from primd_client.prompt import DEFAULT_MAX_TOKENS, cited


def read_turns(lines):
    """Input lines → ("partial" | "final", text); blank lines and JSON objects with
    neither key are skipped."""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        msg = None
        if line.startswith("{"):
            try:
                msg = json.loads(line)
            except ValueError:
                pass
        if not isinstance(msg, dict):
            yield "final", line  # a typed question
        elif isinstance(msg.get("final"), str):
            yield "final", msg["final"]
        elif isinstance(msg.get("partial"), str):
            yield "partial", msg["partial"]


def show_prompt(messages, out):
    for m in messages:
        print(f"--- {m['role']}\n{m['content']}", file=out)
    print(file=out, flush=True)


def main(argv=None, stdin=sys.stdin, out=sys.stdout):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--primd", default="unix:/run/primd/primd.sock",
                    help="primd's socket: unix:PATH or tcp:HOST:PORT")
    ap.add_argument("--llm-url", help="an OpenAI-compatible base URL (http://127.0.0.1:8080/v1); "
                    "none: print the prompt")
    ap.add_argument("--model", help="the model name the server wants (Ollama: one it has pulled)")
    ap.add_argument("--api-key", default=os.environ.get("LLM_API_KEY"),
                    help="sent as a bearer token (default: $LLM_API_KEY)")
    ap.add_argument("--session", default="agent-loop")
    ap.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                    help="cap on the sources in the prompt, in estimated LLM tokens")
    ap.add_argument("--context-tokens", type=int,
                    help="primd's context budget per turn, in word pieces (default: the daemon's)")
    ap.add_argument("--low-evidence", choices=["mark", "drop", "keep"], default="mark")
    ap.add_argument("--history", type=int, default=4, help="earlier exchanges sent to the LLM")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds for primd and the LLM")
    args = ap.parse_args(argv)

    history = []
    turn = 1
    with Client.connect(args.primd, timeout=args.timeout) as primd:
        for kind, text in read_turns(stdin):
            if kind == "partial":
                primd.partial(args.session, turn, text)
                continue
            result = primd.query(args.session, turn, text, timeout=args.timeout,
                                 context_tokens=args.context_tokens)
            turn += 1
            if not text.strip():
                continue  # nothing was said
            prompt = build_prompt(result, text, max_tokens=args.max_tokens,
                                  low_evidence=args.low_evidence,
                                  history=history[-2 * args.history:] if args.history else [])
            if not args.llm_url:
                show_prompt(prompt.messages, out)
                continue
            try:
                reply = chat(args.llm_url, prompt.messages, model=args.model,
                             timeout=args.timeout, api_key=args.api_key)
            except LLMError as e:
                print(f"LLM error: {e}", file=sys.stderr)
                continue
            print(f"user: {text}\nassistant: {reply}", file=out)
            for s in cited(reply, prompt.sources):
                print(f"  [{s.number}] {s.title}", file=out)
            out.flush()
            history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
    return 0


if __name__ == "__main__":
    sys.exit(main())
