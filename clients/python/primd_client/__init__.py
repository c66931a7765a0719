"""primd_client: talk to `primd run --listen` (docs/protocol.md, version 1).

Standard library only. `Client` blocks (a reader thread), `AsyncClient` awaits (a
reader task); both send the partial and final transcripts of a (session, turn) and
return primd's final result for that turn. The framework adapters live in
`primd_client.pipecat_adapter` (needs pipecat-ai) and `primd_client.livekit_adapter`
(works on the objects LiveKit Agents hands it); importing `primd_client` imports
neither framework.
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

__all__ = [
    "AsyncClient",
    "Client",
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
