#!/usr/bin/env python3
"""Ask primd one question as a voice agent would: partials while "speaking", then the
final, then print what an LLM would get: primd's context (the best sentences) as
numbered sources with their passages' titles. Standard library only. From the repository's root:

    demo/run    # once: builds target/release/primd and index/demo.idx (the museum demo)
    target/release/primd run --listen unix:/tmp/primd.sock --index index/demo.idx --input none &
    PYTHONPATH=clients/python python3 clients/python/examples/query.py unix:/tmp/primd.sock "Can I bring my dog inside the museum?"
"""

import sys
import time

from primd_client import Client
from primd_client.prompt import sources, sources_text


def main():
    address, question = sys.argv[1], " ".join(sys.argv[2:]) or "What time does the planetarium show start?"
    with Client.connect(address) as c:
        print(f"primd {c.hello['primd']}, {c.hello['passages']} passages", file=sys.stderr)
        words = question.split()
        for n in range(1, len(words)):  # the recognizer's growing hypothesis
            c.partial("example", 1, " ".join(words[:n]))
            time.sleep(0.25)
        t0 = time.monotonic()
        result = c.query("example", 1, question)
        took = (time.monotonic() - t0) * 1000
        print(f"final → result: {took:.2f} ms on this clock, {result['ms']['eou_to_result']:.3f} ms in primd "
              f"(path {result.get('path')})", file=sys.stderr)
        print(sources_text(sources(result, None)))  # agent_loop.py: the whole prompt


if __name__ == "__main__":
    main()
