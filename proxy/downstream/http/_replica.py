"""Replica markers in handshake-era session ids, so a stock load balancer can route a session home.

`initialize` carries no session id, so no hash of the id can pick the replica that created the
session. Instead every replica prefixes the ids it issues with its own id (`<replica>.<sdk id>`)
and the load balancer routes on that prefix (`deploy/nginx.conf`: a `map` on
`$http_mcp_session_id`). The SDK makes up the ids itself with no hook, so this ASGI layer does the
rewriting: it marks the `Mcp-Session-Id` of every response and strips the marker from every
request. A request marked for another replica (its home is down and the balancer fell back here)
is answered 404 at once, as for any unknown session, so the client re-initializes.
2026-era requests carry no session id and pass through untouched.
"""

from __future__ import annotations

import re

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.types import INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["REPLICA_ID_PATTERN", "ReplicaMarker"]

# A DNS label, so a StatefulSet pod name works as is; `.` never occurs in it and ends the marker.
REPLICA_ID_PATTERN = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_HEADER = MCP_SESSION_ID_HEADER.lower().encode("ascii")


class ReplicaMarker:
    """Marks outgoing session ids with `replica_id` and unmarks incoming ones.

    Raises:
        ValueError: `replica_id` is not a lowercase DNS label.
    """

    def __init__(self, replica_id: str) -> None:
        if not re.fullmatch(REPLICA_ID_PATTERN, replica_id):
            raise ValueError(f"replica id {replica_id!r} must be a lowercase DNS label (a-z, 0-9, '-')")
        self.replica_id = replica_id
        self._prefix = f"{replica_id}.".encode("ascii")

    def mark(self, session_id: bytes) -> bytes:
        return self._prefix + session_id

    def unmark(self, session_id: bytes) -> bytes | None:
        """The SDK's own id when `session_id` was issued here, else None."""
        return session_id[len(self._prefix):] if session_id.startswith(self._prefix) else None

    async def serve(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Run `app` with the request's session id unmarked and the response's marked."""
        headers = []
        for name, value in scope["headers"]:
            if name == _HEADER:
                own = self.unmark(value)
                if own is None:
                    await _session_not_found()(scope, receive, send)
                    return
                value = own
            headers.append((name, value))

        async def send_marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [(n, self.mark(v) if n.lower() == _HEADER else v)
                                                  for n, v in message.get("headers", [])]}
            await send(message)

        await app({**scope, "headers": headers}, receive, send_marked)


def _session_not_found() -> Response:
    """The SDK's own answer to an unknown session: 404 with a JSON-RPC error and no id."""
    body = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message="Session not found"))
    return Response(body.model_dump_json(by_alias=True, exclude_unset=True), status_code=404,
                    media_type="application/json")
