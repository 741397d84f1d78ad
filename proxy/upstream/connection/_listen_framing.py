"""A `subscriptions/listen` stream of JSON values, read as the event stream the SDK expects.

A 2026-07-28 server may answer the listen request with `application/json` and then write one JSON-RPC
message per line on the open response (the reference everything-server does). The SDK reads such an answer
as one JSON body, to its end, which a listen stream never reaches: the acknowledgement was never seen and
whoever waited on it waited for the upstream's whole `timeout`. This response hook hands the SDK each JSON
value of that body as one Server-Sent Event as it arrives, whatever separates them (lines, nothing, or a
value spread over several lines).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2
from mcp.shared.inbound import MCP_METHOD_HEADER

__all__ = ["frame_listen_stream"]

_LISTEN = "subscriptions/listen"
_decoder = json.JSONDecoder()


class _EventsOfJsonValues(httpx2.AsyncByteStream):
    """The JSON values of `body`, each as one `message` event, within `limit` characters of a value."""

    def __init__(self, body: httpx2.AsyncByteStream, limit: int) -> None:
        self._body = body
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = ""
        async for chunk in self._body:
            pending += chunk.decode("utf-8", "replace")
            while True:
                start = len(pending) - len(pending.lstrip())
                try:
                    value, end = _decoder.raw_decode(pending, start)
                except json.JSONDecodeError:
                    break  # not complete yet
                pending = pending[end:]
                yield f"event: message\ndata: {json.dumps(value, separators=(',', ':'))}\n\n".encode()
            if len(pending) > self._limit:
                raise httpx2.DecodingError(f"a listen stream message over {self._limit} characters")

    async def aclose(self) -> None:
        await self._body.aclose()


def frame_listen_stream(limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """A response hook: a listen request's `application/json` answer becomes `text/event-stream`."""

    async def reframe(response: httpx2.Response) -> None:
        content_type = response.headers.get("content-type", "").lower()
        if (
            response.request.headers.get(MCP_METHOD_HEADER) == _LISTEN
            and content_type.startswith("application/json")
            and response.headers.get("content-encoding", "identity") == "identity"
            and isinstance(response.stream, httpx2.AsyncByteStream)
        ):
            response.stream = _EventsOfJsonValues(response.stream, limit)
            response.headers["content-type"] = "text/event-stream"

    return reframe
