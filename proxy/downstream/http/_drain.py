"""Graceful drain: stop accepting, let the calls in flight finish, end the notification streams.

Uvicorn's graceful shutdown already closes the listening socket and waits (bounded) for every
request in flight. A notification stream never finishes on its own, though: a handshake-era
session's `GET /mcp` and a 2026-era `subscriptions/listen` POST would hold the shutdown until its
deadline and then be cut mid-stream. `StreamDrain` ends those streams cleanly as soon as the drain
starts (the client sees the stream close and reconnects, through the balancer, elsewhere), so the
wait covers only requests that do work.
"""

from __future__ import annotations

import anyio
from mcp.shared.inbound import MCP_METHOD_HEADER
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["StreamDrain"]

_METHOD = MCP_METHOD_HEADER.lower().encode("ascii")


def is_notification_stream(scope: Scope) -> bool:
    """A `GET` (handshake-era standalone stream) or a 2026-era `subscriptions/listen` POST."""
    if scope["method"] == "GET":
        return True
    return any(name == _METHOD and value == b"subscriptions/listen" for name, value in scope["headers"])


class StreamDrain:
    """Tracks the open notification streams; `start()` ends them and refuses new ones."""

    def __init__(self) -> None:
        self.draining = False
        self._streams: set[anyio.CancelScope] = set()

    def start(self) -> None:
        self.draining = True
        for stream in self._streams:
            stream.cancel()

    async def serve(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_notification_stream(scope):
            await app(scope, receive, send)
            return
        if self.draining:
            await Response("draining", status_code=503)(scope, receive, send)
            return
        started = finished = False

        async def tracked(message: Message) -> None:
            nonlocal started, finished
            started = started or message["type"] == "http.response.start"
            finished = message["type"] == "http.response.body" and not message.get("more_body", False)
            await send(message)

        with anyio.CancelScope() as stream:
            self._streams.add(stream)
            try:
                await app(scope, receive, tracked)
            finally:
                self._streams.discard(stream)
        if not stream.cancelled_caught or finished:
            return
        if not started:
            await Response("draining", status_code=503)(scope, receive, send)
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})
