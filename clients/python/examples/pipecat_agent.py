#!/usr/bin/env python3
"""primd in a Pipecat pipeline: PrimdRetrieval between the STT service and the user
context aggregator.

Offline (no API keys, no audio): scripted transcription frames, as an STT service emits
them, go through PrimdRetrieval and the real LLMUserAggregator; the LLM context is
printed, with primd's `context` (the best sentences, as numbered sources `[1] Title: ...`)
right before the user's question (`--passages`: whole passages instead, `evidence="passages"`):

    demo/run    # once: builds target/release/primd and index/demo.idx (the museum demo)
    target/release/primd run --listen unix:/tmp/primd.sock --index index/demo.idx --input none &
    pip install './clients/python[pipecat]'
    python3 clients/python/examples/pipecat_agent.py unix:/tmp/primd.sock

In a voice bot the processor goes in the same place (see `voice_pipeline` below).
"""

import asyncio
import sys

from pipecat.frames.frames import InterimTranscriptionFrame, TranscriptionFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator
from pipecat.tests.utils import run_test

from primd_client.pipecat_adapter import PrimdRetrieval


def voice_pipeline(transport, stt, llm, tts, address="unix:/run/primd/primd.sock"):
    """The wiring of a real bot (any transport, STT, LLM and TTS services)."""
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair

    context = LLMContext(messages=[{"role": "system", "content": "You are the museum's guide."}])
    aggregators = LLMContextAggregatorPair(context)
    return Pipeline([
        transport.input(), stt,
        PrimdRetrieval(address),          # partials while the user speaks, passages at the final
        aggregators.user(), llm, tts, transport.output(), aggregators.assistant(),
    ])


async def main(address, evidence="context"):
    context = LLMContext(messages=[{"role": "system", "content": "You are the museum's guide."}])
    words = "Can I bring my dog inside the museum?".split()
    frames = [InterimTranscriptionFrame(text=" ".join(words[:n]), user_id="visitor", timestamp="")
              for n in range(1, len(words))]
    frames.append(TranscriptionFrame(text=" ".join(words), user_id="visitor", timestamp=""))
    await run_test(Pipeline([PrimdRetrieval(address, evidence=evidence), LLMUserAggregator(context)]),
                   frames_to_send=frames)
    for m in context.messages:
        print(f"--- {m['role']}\n{m['content']}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--passages"]
    asyncio.run(main(args[0] if args else "unix:/run/primd/primd.sock",
                     "passages" if "--passages" in sys.argv else "context"))
