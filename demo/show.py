#!/usr/bin/env python3
"""Pretty-prints `primd run` JSON lines for the demo, checking each answer against
demo/questions.jsonl. Usage: primd run ... | python3 demo/show.py [demo/questions.jsonl]
(without it, as for live speech in demo/live, answers are shown but not checked)"""

import json
import sys

expected = [json.loads(l)["expected_id"] for l in open(sys.argv[1])] if len(sys.argv) > 1 else None
right = 0
for line in sys.stdin:
    ev = json.loads(line)
    if ev["type"] == "speculative":
        first = ev["candidates"][0]["title"] if ev["candidates"] else "-"
        print(f"   … \"{ev['partial']}\" → speculating, best guess: {first}", flush=True)
        continue
    n = ev["utterance"]
    top = ev["results"][0] if ev["results"] else None
    want = expected[n - 1] if expected and n <= len(expected) else None
    ok = top is not None and top["id"] == want
    right += ok
    mark = ("✓" if ok else "✗") if expected else "→"
    c, ms = ev["counts"], ev["ms"]
    print(f"{n:2}. \"{ev['text']}\"")
    conf = ev.get("confidence")
    sure = f", confidence {conf:.2f}, evidence {ev.get('evidence')}" if conf is not None else ""
    print(f"    {mark} {top['title']} (score {top['score']:.2f}{sure})"
          if top else f"    {mark} (no result)")
    print(f"    results {ms['eou_to_result']:.2f} ms after end of speech via '{ev['path']}' "
          f"({c['partials']} partials, {c['embeds']} embeds, {c['speculative_searches']} "
          f"speculative searches, {c['gate_skips']} gate skips)\n", flush=True)
if expected:
    print(f"{right}/{len(expected)} questions answered with the expected passage")
