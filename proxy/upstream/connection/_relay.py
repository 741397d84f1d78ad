"""The way back from an upstream to the downstream caller whose request it is serving.

While a tool runs, an upstream may ask its client (toolbridge) for sampling, elicitation or roots,
and may log about the call. Those must reach the call that caused them, and no other: another
call may be another user's. On a 2026-era connection the requests come back inside the call itself
(`InputRequiredResult` rounds that the SDK drives in the caller's task), so the context variable
set around the call names the caller exactly. On a handshake-era connection they arrive on the
connection with nothing on the wire linking them to a request: they are the call's only when it is
the one call in flight on the connection and no call ended recently without its answer (a late
request of a cancelled call must not reach the next caller). Otherwise the upstream gets a clear
error (never a hang), and a log message goes to the fleet's notice sink instead.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import MCPError, types
from mcp.client.context import ClientRequestContext
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from proxy.protocol import BackChannel, NoticeSink, SamplingAnswer

__all__ = ["InFlight", "client_callbacks"]

logger = logging.getLogger(__name__)

_LOG_DRAIN_TIMEOUT = 5.0
# Log messages on their way to one caller at once: past it an upstream's messages are dropped (and counted),
# so a flood towards a slow client costs a bounded queue, not a blocked send per message (20,000 held ~300 MB).
MAX_PENDING_LOGS = 256
# How long after a call ended without its answer (cancelled, timed out, connection trouble) a request
# or log on its handshake-era connection may still be that call's, and so is nobody's.
ORPHAN_WINDOW = 60.0




@dataclass
class _Call:
    channel: BackChannel | None  # None: a request whose caller cannot be asked (e.g. a 2026-era client's read)
    logs_pending: int = 0
    logs_dropped: int = 0
    drained: anyio.Event = field(default_factory=anyio.Event)


_current: ContextVar[_Call | None] = ContextVar("toolbridge_upstream_call", default=None)


class InFlight:
    """The calls in flight on one connection, each with its downstream back channel."""

    def __init__(self) -> None:
        self._calls: list[_Call] = []
        self._orphans: list[float] = []  # when each call that ended without its answer stops counting

    @asynccontextmanager
    async def call(self, channel: BackChannel | None) -> AsyncIterator[None]:
        """Around one upstream request: what the upstream asks or logs meanwhile may be its caller's.

        A request without a channel counts too: while it runs, nothing is certainly another call's.
        On the way out, log messages already received for the call are delivered first, so they
        reach the caller before the call's own answer does.
        """
        entry = _Call(channel)
        token = _current.set(entry)
        self._calls.append(entry)
        answered = False
        try:
            yield
            answered = True
        except MCPError as exc:
            answered = exc.code not in (types.REQUEST_TIMEOUT, types.CONNECTION_CLOSED)  # an error answer ends it
            raise
        finally:
            _current.reset(token)
            self._calls.remove(entry)
            if not answered:
                self._orphans.append(anyio.current_time() + ORPHAN_WINDOW)
            if entry.logs_dropped:
                logger.warning("dropped %d log messages of one call: its caller read them too slowly",
                               entry.logs_dropped)
            if entry.logs_pending:
                with anyio.move_on_after(_LOG_DRAIN_TIMEOUT, shield=True):
                    await entry.drained.wait()

    def _caller(self) -> _Call | None:
        """The call that is certainly the requester: this task's own, else the only one that may be."""
        own = _current.get()
        if own is not None:
            return own
        now = anyio.current_time()
        self._orphans = [until for until in self._orphans if until > now]
        if len(self._calls) == 1 and not self._orphans:
            return self._calls[0]
        return None

    def channel(self) -> BackChannel | None:
        call = self._caller()
        return call.channel if call is not None else None

    async def log(self, server: str, params: types.LoggingMessageNotificationParams, unrelated: NoticeSink) -> None:
        call = self._caller()
        if call is None or call.channel is None:
            await unrelated(server, types.LoggingMessageNotification(params=params))
            return
        if call.logs_pending >= MAX_PENDING_LOGS:
            call.logs_dropped += 1
            return
        if not call.logs_pending:
            call.drained = anyio.Event()
        call.logs_pending += 1
        try:
            await call.channel.log(server, params)
        finally:
            call.logs_pending -= 1
            if not call.logs_pending:
                call.drained.set()


def _no_caller(server: str, what: str) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"toolbridge: {what} from server {server} reached no downstream caller: it names no call, "
                "and no call or several may have made it",
    )


def _key(context: ClientRequestContext) -> str | None:
    """The upstream's key for a request in its input-required rounds (2026 era: the SDK names the request by
    it); a handshake-era request has only a JSON-RPC id, no name of the upstream's choosing."""
    modern = context.session.protocol_version in MODERN_PROTOCOL_VERSIONS
    return context.request_id if modern and isinstance(context.request_id, str) else None


def client_callbacks(server: str, in_flight: InFlight, notices: NoticeSink) -> dict[str, Any]:
    """The `Client` callbacks that relay a server→client request to its caller, and route logs."""

    async def sampling(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> SamplingAnswer:
        channel = in_flight.channel()
        return await channel.sample(params, _key(context)) if channel is not None \
            else _no_caller(server, "a sampling request")

    async def elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        channel = in_flight.channel()
        return await channel.elicit(params, _key(context)) if channel is not None \
            else _no_caller(server, "an elicitation")

    async def list_roots(context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        channel = in_flight.channel()
        return await channel.list_roots(_key(context)) if channel is not None \
            else _no_caller(server, "a roots request")

    async def logging(params: types.LoggingMessageNotificationParams) -> None:
        await in_flight.log(server, params, notices)

    return {
        "sampling_callback": sampling,
        "elicitation_callback": elicitation,
        "list_roots_callback": list_roots,
        "logging_callback": logging,
    }
