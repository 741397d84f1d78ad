"""An upstream's results without `resultType`, taken as `complete`.

Every 2026-07-28 result names its type, and the spec says an omitted one counts as `complete` (SEP-2322).
The SDK checks each answer against the era's schema, which requires the field, so a server that leaves it
out somewhere (the reference everything-server does on its streamed `tools/call` results) had its whole
answer refused, content and all. Here every result without the field gets `"complete"` on its way to the
SDK, whatever the era: a handshake-era answer's copy is dropped by the SDK as a later revision's field.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

__all__ = ["completed_results"]

Streams = tuple[ObjectReceiveStream[Any], ObjectSendStream[Any]]


def _completed(item: Any) -> Any:
    if not isinstance(item, SessionMessage):
        return item
    message = item.message
    if not isinstance(message, types.JSONRPCResponse) or "resultType" in message.result:
        return item
    result = {**message.result, "resultType": "complete"}
    return SessionMessage(message.model_copy(update={"result": result}), item.metadata)


@asynccontextmanager
async def completed_results(transport: AbstractAsyncContextManager[Streams]) -> AsyncIterator[Streams]:
    """`transport`'s streams, with every result that lacks a `resultType` read as `complete`."""
    async with transport as (read, write), anyio.create_task_group() as tg:
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def forward() -> None:
            async with send, read:
                async for item in read:
                    await send.send(_completed(item))

        tg.start_soon(forward)
        try:
            yield receive, write
        finally:
            tg.cancel_scope.cancel()
