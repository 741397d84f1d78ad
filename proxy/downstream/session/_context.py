"""What the downstream handlers share: the fleet they route to, the session's era, pagination, one mapping of errors.

A tool call reports failures as an error result the model reads; the other requests (resources,
prompts, completion, logging) answer with a JSON-RPC error instead, with the upstream's own code
when it answered with one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from mcp import Client, MCPError, types
from mcp.server.context import ServerRequestContext
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from proxy.errors import MissingCapability, ToolbridgeError, UpstreamError, UpstreamTimeout, UpstreamUnavailable
from proxy.protocol import TASKS, BackChannel, ProgressCallback

PAGE_SIZE = 100
T = TypeVar("T")
RequestContext = ServerRequestContext[Any, Any]


def handshake_era(ctx: RequestContext) -> bool:
    """Whether the request comes from a handshake-era session (one that ran `initialize`), not a 2026-era client."""
    return ctx.session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS


def takes_tasks(ctx: RequestContext) -> bool:
    """Whether this request declared the tasks extension (2026 era: in its own `_meta` capabilities), so a task
    an upstream makes of it is handed to it."""
    if ctx.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and bool(capabilities.extensions) and TASKS in capabilities.extensions


def page(items: Sequence[T], cursor: str | None) -> tuple[list[T], str | None]:
    """One page of `items` from an opaque cursor (an offset); a cursor we did not mint is an error.

    Raises:
        MCPError: the cursor is not one of ours.
    """
    start = 0
    if cursor:
        if not cursor.isdigit() or int(cursor) > len(items):
            raise MCPError(types.INVALID_PARAMS, f"toolbridge: invalid cursor {cursor[:40]!r}")
        start = int(cursor)
    end = start + PAGE_SIZE
    return list(items[start:end]), str(end) if end < len(items) else None


def protocol_error(exc: ToolbridgeError) -> MCPError:
    """The JSON-RPC error a downstream client gets for `exc`."""
    if isinstance(exc, UpstreamTimeout):
        return MCPError(types.REQUEST_TIMEOUT, str(exc))
    if isinstance(exc, UpstreamUnavailable):
        return MCPError(types.INTERNAL_ERROR, str(exc))
    if isinstance(exc, MissingCapability):
        return MCPError(exc.code or types.MISSING_REQUIRED_CLIENT_CAPABILITY, str(exc),
                        {"requiredCapabilities": exc.required})
    if isinstance(exc, UpstreamError):
        return MCPError(exc.code if exc.code is not None else types.INTERNAL_ERROR, str(exc))
    return MCPError(types.INVALID_PARAMS, str(exc))


class Upstreams(Protocol):
    """What the downstream side needs from the fleet."""

    async def call_tool(
        self,
        server: str,
        raw_name: str,
        arguments: dict[str, Any],
        progress_callback: ProgressCallback | None = None,
        channel: BackChannel | None = None,
    ) -> types.CallToolResult: ...

    async def request(
        self, server: str, what: str, operation: Callable[[Client], Awaitable[T]], channel: BackChannel | None = None
    ) -> T: ...

    async def subscribe(self, server: str, uris: Sequence[str]) -> None: ...

    def unsubscribe(self, server: str, uri: str) -> None: ...

    def logs(self, server: str) -> bool: ...
