"""Legacy HTTP+SSE upstreams: our own client transport, so the event size limit is the config's.

The SDK's `sse_client` reads events with a fixed 1 MiB limit: a bigger result broke the stream,
and with it every call on the connection. The protocol is the same: GET the event stream, wait
for the `endpoint` event (same origin only), then POST each message there. Redirects are not
followed (our httpx2 client never follows them), so a message cannot be sent to another origin.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx2
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from proxy.errors import UpstreamError, UpstreamRefused

logger = logging.getLogger(__name__)

_SSE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


async def _read_events(
    events: httpx2.EventSource, url: str, server: str, send: anyio.abc.ObjectSendStream[Any],
    *, task_status: anyio.abc.TaskStatus[str],
) -> None:
    """Forward each `message` event; report the `endpoint` event's URL once it arrives."""
    started = False
    async with send:
        async for event in events:
            if event.event == "endpoint" and not started:
                endpoint = urljoin(url, event.data)
                if _origin(endpoint) != _origin(url):
                    raise UpstreamRefused(server, "the SSE endpoint event points at another origin")
                started = True
                task_status.started(endpoint)
            elif event.event == "message" and event.data:
                try:
                    message = jsonrpc_message_adapter.validate_json(event.data, by_name=False)
                except ValueError:
                    logger.warning("server %s: ignored an SSE event that is not JSON-RPC: %.120r", server, event.data)
                    continue
                await send.send(SessionMessage(message))
    if not started:
        raise UpstreamError(server, "the SSE stream ended before its endpoint event")


async def _post_messages(
    client: httpx2.AsyncClient, endpoint: str, receive: anyio.abc.ObjectReceiveStream[SessionMessage]
) -> None:
    async with receive:
        async for item in receive:
            body = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            (await client.post(endpoint, json=body)).raise_for_status()


@asynccontextmanager
async def sse_transport(
    client: httpx2.AsyncClient, url: str, server: str, max_event_bytes: int
) -> AsyncIterator[tuple[anyio.abc.ObjectReceiveStream[Any], anyio.abc.ObjectSendStream[SessionMessage]]]:
    """Open the event stream and yield the (read, write) message streams of the session.

    Raises:
        httpx2.HTTPStatusError: the endpoint refused the stream.
        httpx2.SSEError: the answer is not an event stream, or an event exceeded `max_event_bytes`.
        UpstreamError: the stream ended, or its endpoint is on another origin.
    """
    to_session, read = anyio.create_memory_object_stream[Any](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    async with to_session, read, write, from_session, client.stream("GET", url, headers=_SSE_HEADERS) as response:
        response.raise_for_status()
        events = httpx2.EventSource(response, max_event_size=max_event_bytes)
        async with anyio.create_task_group() as tg:
            endpoint = await tg.start(_read_events, events, url, server, to_session)
            tg.start_soon(_post_messages, client, endpoint, from_session)
            try:
                yield read, write
            finally:
                tg.cancel_scope.cancel()
