"""An ASGI wrapper that answers `subscriptions/listen` the way some 2026-07-28 servers do: `application/json`
with one JSON-RPC message per line on the open response (the reference everything-server), instead of
Server-Sent Events; or, with `silent`, with nothing at all (a stream never acknowledged).
"""

from __future__ import annotations

from typing import Any

Asgi = Any


def json_lines(app: Asgi, *, silent: bool = False) -> Asgi:
    """`app` with its listen streams' events written as JSON lines (or dropped)."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or dict(scope["headers"]).get(b"mcp-method") != b"subscriptions/listen":
            await app(scope, receive, send)
            return
        pending = b""

        async def reframe(message: dict[str, Any]) -> None:
            nonlocal pending
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message["headers"] if k.lower() not in (b"content-type", b"content-length")]
                await send({**message, "headers": [*kept, (b"content-type", b"application/json")]})
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            pending += message.get("body", b"")
            *events, pending = pending.replace(b"\r\n", b"\n").split(b"\n\n")
            lines = [line[5:].strip() for event in events for line in event.split(b"\n") if line.startswith(b"data:")]
            body = b"" if silent else b"".join(line + b"\n" for line in lines if line)
            await send({"type": "http.response.body", "body": body, "more_body": message.get("more_body", False)})

        await app(scope, receive, reframe)

    return wrapped
