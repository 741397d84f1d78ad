"""The ports between the two wings: how an upstream's requests and notices reach downstream.

While a tool runs, an upstream may ask its client (toolbridge) for sampling, elicitation or roots,
report progress and log about the call; a `BackChannel` is one downstream call's way back for all of
that. What no call claims goes to a `NoticeSink`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from mcp import types

__all__ = ["BackChannel", "Notice", "NoticeSink", "ProgressCallback", "SamplingAnswer"]

Notice = tuple[str, types.ServerNotification]
"""`(server, notification)`: what an upstream said that no call claimed."""
NoticeSink = Callable[[str, types.ServerNotification], Awaitable[None]]
"""Told `(server, notification)` of what no call claimed: resource updates, unrelated logs."""
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
"""Told `(progress, total, message)` of a call's progress."""
SamplingAnswer = types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData


class BackChannel(Protocol):
    """One downstream call's way back."""

    takes_tasks: bool
    """Whether the caller declared the tasks extension: a task the upstream makes is handed to it (`HandedOver`);
    otherwise the upstream side waits for the task and answers with its result."""

    capabilities: types.ClientCapabilities
    """What the caller declared: a 2026-era upstream request made for it carries that (`caller_meta`)."""

    handshake_era: bool
    """Whether the caller speaks the handshake era (it is asked over its own session): its requests go to a
    server that speaks both eras in the handshake era, where the server has a back channel too."""

    # `key`: the upstream's name for the request (its `inputRequests` key), kept where the caller is asked in
    # rounds of its own.
    async def sample(self, params: types.CreateMessageRequestParams, key: str | None = None) -> SamplingAnswer: ...

    async def elicit(
        self, params: types.ElicitRequestParams, key: str | None = None
    ) -> types.ElicitResult | types.ErrorData: ...

    async def list_roots(self, key: str | None = None) -> types.ListRootsResult | types.ErrorData: ...

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None: ...
