"""A transport whose outgoing requests carry their caller's capabilities (`proxy.protocol.carried`).

The SDK stamps a 2026-era request's `_meta` as it sends it, so the caller's declaration can only
take the place of toolbridge's after that: on the transport's write stream, the last step before the
wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from anyio.abc import ObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

from proxy.protocol import carried

__all__ = ["carrying_capabilities"]


class _Carrying(ObjectSendStream[SessionMessage]):
    def __init__(self, inner: ObjectSendStream[SessionMessage]) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and (params := carried(message.params)) is not message.params:
            item = SessionMessage(message.model_copy(update={"params": params}), item.metadata)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def carrying_capabilities(transport: AbstractAsyncContextManager[Any]) -> AsyncIterator[tuple[Any, Any]]:
    """`transport`'s streams, its requests carrying their caller's capabilities."""
    async with transport as (read, write):
        yield read, _Carrying(write)
