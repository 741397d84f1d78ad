"""What a finished tool call looks like to the operator's tools (metrics, the audit log)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BRIDGE_SERVER", "CallObserver", "CallRecord", "ConnectionId"]

BRIDGE_SERVER = "toolbridge"
"""The `server` of a bridge tool's own work (`tool_search`, `tool_describe`, or a refused call)."""


@dataclass(frozen=True)
class ConnectionId:
    """Identity of one stdio or in-memory connection (the SDK enters the lifespan once per connection)."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])


@dataclass(frozen=True)
class CallRecord:
    """One `tools/call`, as answered. `tool` is the tool that ran (the target of a `tool_call`)."""

    started: float  # wall clock, seconds since the epoch
    duration: float  # seconds
    session: str | None
    principal: str  # who the call acted for (`caller`): `anonymous` behind a shared token, an OAuth user's own
    profile: str
    client: str | None
    client_version: str | None
    tool: str
    server: str
    via: str | None  # "tool_call" when the bridge forwarded it
    outcome: str  # "ok", "tool_error" (the result has isError) or "refused"/"failed"
    error: str | None  # the error class, e.g. "InvalidArguments", "UpstreamTimeout"
    arguments: dict[str, Any]


CallObserver = Callable[[CallRecord], None]


def session_label(key: Hashable | None) -> str | None:
    """A session key as text: the `Mcp-Session-Id`, or the connection's own id."""
    if isinstance(key, ConnectionId):
        return key.id
    return None if key is None else str(key)
