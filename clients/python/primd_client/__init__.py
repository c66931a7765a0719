"""primd_client: talk to `primd run --listen` (docs/protocol.md, version 1).

Standard library only. `Client` blocks (a reader thread), `AsyncClient` awaits (a
reader task); both send the partial and final transcripts of a (session, turn) and
return primd's final result for that turn. The framework adapters live in
`primd_client.pipecat_adapter` (needs pipecat-ai) and `primd_client.livekit_adapter`
(works on the objects LiveKit Agents hands it); importing `primd_client` imports
neither framework.

`result.context` (a `Context` of `Span`s) is typed in `primd_client.results`;
`primd_client.prompt` turns a result into chat-completions messages (numbered sources,
the low-evidence instruction, a token cap) and `primd_client.llm` sends them to an
OpenAI-compatible server (llama.cpp, Ollama) with urllib.
"""

from .aio import AsyncClient
from .client import Client
from .protocol import (
    PROTOCOL,
    ConnectionClosed,
    PrimdError,
    ProtocolError,
    ServerError,
    Timeout,
    TurnAbandoned,
    parse_address,
    passages_text,
)
from .llm import LLMError, achat, chat
from .prompt import Prompt, Source, build_prompt, estimate_tokens, prompt_messages, sources
from .results import Context, Result, Span

__all__ = [
    "AsyncClient",
    "Client",
    "Context",
    "LLMError",
    "Prompt",
    "Result",
    "Source",
    "Span",
    "achat",
    "build_prompt",
    "chat",
    "estimate_tokens",
    "prompt_messages",
    "sources",
    "PROTOCOL",
    "ConnectionClosed",
    "PrimdError",
    "ProtocolError",
    "ServerError",
    "Timeout",
    "TurnAbandoned",
    "parse_address",
    "passages_text",
]
__version__ = "0.1.0"
