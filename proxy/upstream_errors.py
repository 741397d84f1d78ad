"""Upstream failures in toolbridge's terms.

The SDK, httpx2 and the OS each fail in their own way (often inside exception groups); this
module maps every such failure to the most specific `UpstreamError`, naming the server and the
reason and never a credential.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx2
from mcp import MCPError, types

from proxy.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable

_AUTH_STATUSES = (401, 403)
REJECT_STATUSES = (400, 404, 405, 406, 415)


class UpstreamRefused(UpstreamUnavailable):
    """A failure retrying will not fix soon: missing command, rejected credentials, not MCP."""


class SessionLost(UpstreamUnavailable):
    """The upstream no longer knows our session (it restarted); the request never ran."""


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _primary(exc: BaseException) -> BaseException:
    """The most telling leaf of a (possibly grouped) failure: transport errors beat the rest."""
    leaves = _leaves(exc)
    for kind in (httpx2.HTTPError, OSError, MCPError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0]


def is_session_gone(exc: MCPError) -> bool:
    return exc.code == types.INVALID_REQUEST and "session" in exc.message.lower()


def rejects_streamable(exc: BaseException, statuses: Sequence[int]) -> bool:
    leaf = _primary(exc)
    unexpected = isinstance(leaf, MCPError) and leaf.message.startswith("Unexpected content type")
    return unexpected or any(status in REJECT_STATUSES for status in statuses)


def translate(server: str, exc: BaseException, statuses: Sequence[int] = ()) -> UpstreamError:
    """Map a connect-time or connection-level failure to the most specific `UpstreamError`."""
    if isinstance(exc, UpstreamError):
        return exc
    auth = next((s for s in statuses if s in _AUTH_STATUSES), None)
    if auth is not None:
        return UpstreamRefused(server, f"authentication failed (HTTP {auth}); check its credentials")
    leaf = _primary(exc)
    if isinstance(leaf, UpstreamError):
        return leaf
    if isinstance(leaf, httpx2.SSEError):
        return UpstreamRefused(server, "not an MCP endpoint (no SSE event stream)")
    if isinstance(leaf, httpx2.HTTPStatusError):
        status = leaf.response.status_code
        if 400 <= status < 500 and status not in (408, 429):
            return UpstreamRefused(server, f"not an MCP endpoint (HTTP {status})")
        return UpstreamUnavailable(server, f"HTTP {status}")
    if isinstance(leaf, httpx2.TimeoutException):
        return UpstreamTimeout(server, "HTTP request timed out")
    if isinstance(leaf, httpx2.TransportError):
        return UpstreamUnavailable(server, f"cannot reach the server ({type(leaf).__name__}: {leaf})")
    if isinstance(leaf, MCPError):
        return _translate_mcp(server, leaf, statuses)
    if isinstance(leaf, OSError):
        return UpstreamUnavailable(server, f"{type(leaf).__name__}: {leaf.strerror or leaf}")
    return UpstreamUnavailable(server, f"{type(leaf).__name__}: {leaf}")


def _translate_mcp(server: str, exc: MCPError, statuses: Sequence[int]) -> UpstreamError:
    if exc.code == types.CONNECTION_CLOSED:
        return UpstreamUnavailable(server, "connection closed")
    if exc.code == types.REQUEST_TIMEOUT:
        return UpstreamTimeout(server, "request timed out")
    rejected = [s for s in statuses if s in REJECT_STATUSES]
    if rejected or exc.message.startswith("Unexpected content type"):
        why = f"HTTP {rejected[-1]}" if rejected else exc.message
        return UpstreamRefused(server, f"not an MCP endpoint ({why})")
    return UpstreamUnavailable(server, f"protocol error {exc.code}: {exc.message}")
