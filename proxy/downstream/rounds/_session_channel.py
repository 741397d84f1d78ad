"""A handshake-era downstream request's way back: server→client requests and logs on its own stream.

An upstream's sampling, elicitation or roots request during a call is sent to the downstream
client as a request related to the downstream call (so over HTTP it rides that call's stream), and
the client's answer goes back upstream unchanged. A client that did not declare the capability,
or that answers with an error, gives the upstream a clear error instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from mcp import MCPError, types
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, ValidationError

from proxy.downstream.session import RequestContext, scrub_log
from proxy.errors import redact
from proxy.protocol import ProgressCallback

LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
)
LevelOf = Callable[[], types.LoggingLevel | None]
R = TypeVar("R")
ANSWER_TIMEOUT = 300.0  # how long an upstream's request waits for the downstream client's answer
MAX_WAITING = 16  # an upstream's requests waiting on one downstream call's client at once; more get an error


def admits(threshold: types.LoggingLevel | None, level: types.LoggingLevel) -> bool:
    """Whether a session whose level is `threshold` (None: never set) wants a `level` message."""
    return LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold or "debug")


def log_notification(server: str, params: types.LoggingMessageNotificationParams) -> types.LoggingMessageNotification:
    """The upstream's log message, made inert (`scrub_log`), with `logger` naming the server (and the
    upstream's own logger)."""
    params = scrub_log(params)
    logger = f"{server}/{params.logger}" if params.logger else server
    return types.LoggingMessageNotification(params=params.model_copy(update={"logger": logger, "meta": None}))


def refusal(ctx: RequestContext, request: types.InputRequest) -> types.ErrorData | None:
    """The error the upstream gets when the downstream client did not declare what `request` needs."""
    capabilities = ctx.session.client_capabilities or types.ClientCapabilities()
    match request:
        case types.CreateMessageRequest():
            missing = "sampling" if capabilities.sampling is None else None
        case types.ElicitRequest(params=types.ElicitRequestURLParams()):
            missing = "URL elicitation" if capabilities.elicitation is None or capabilities.elicitation.url is None \
                else None
        case types.ElicitRequest():
            missing = "elicitation" if capabilities.elicitation is None else None
        case _:
            missing = "roots" if capabilities.roots is None else None
    if missing is None:
        return None
    return types.ErrorData(code=types.INVALID_REQUEST,
                           message=f"toolbridge: the downstream client does not support {missing}")


def answer_type(request: types.InputRequest) -> type[BaseModel]:
    match request:
        case types.CreateMessageRequest(params=params):
            return types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        case types.ElicitRequest():
            return types.ElicitResult
        case _:
            return types.ListRootsResult


async def _ask(send: Callable[[], Awaitable[R]]) -> R | types.ErrorData:
    """The client's answer, or its error (or a broken answer) as `ErrorData` for the upstream."""
    try:
        return await send()
    except MCPError as exc:
        return types.ErrorData(code=exc.code, message=redact(exc.message))
    except ValidationError:
        return types.ErrorData(code=types.INTERNAL_ERROR, message="toolbridge: the downstream client's answer "
                                                                 "does not follow the protocol")


class Relaying:
    """The upstream's requests a back channel relays, each as one `_relay` of the matching request (under the
    upstream's key for it, if it named one); at most `MAX_WAITING` at a time, so an upstream sending them in bulk
    gets errors instead of piling them up, and each answered with a timeout error after `ANSWER_TIMEOUT`."""

    _waiting = 0
    takes_tasks = False
    handshake_era = False

    async def _relay(self, request: types.InputRequest, key: str | None) -> Any:
        raise NotImplementedError

    async def _bounded(self, request: types.InputRequest, key: str | None) -> Any:
        if self._waiting >= MAX_WAITING:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"toolbridge: {MAX_WAITING} requests are "
                                   "already waiting on the downstream client for this call")
        self._waiting += 1
        try:
            with anyio.move_on_after(ANSWER_TIMEOUT):
                return await self._relay(request, key)
            return types.ErrorData(code=types.REQUEST_TIMEOUT, message="toolbridge: the downstream client did not "
                                   f"answer within {ANSWER_TIMEOUT:g} s")
        finally:
            self._waiting -= 1

    async def sample(self, params: types.CreateMessageRequestParams, key: str | None = None) -> Any:
        return await self._bounded(types.CreateMessageRequest(params=params), key)

    async def elicit(self, params: types.ElicitRequestParams, key: str | None = None) -> Any:
        return await self._bounded(types.ElicitRequest(params=params), key)

    async def list_roots(self, key: str | None = None) -> Any:
        return await self._bounded(types.ListRootsRequest(), key)


class LatestProgress:
    """Progress to one downstream caller: one report in flight; values arriving meanwhile replace each other
    and the latest follows it. An upstream flooding progress to a slow client then costs one value, not a
    blocked send per notification (20,000 of those held ~200 MB)."""

    def __init__(self, report: ProgressCallback) -> None:
        self._report = report
        self._sending = False
        self._latest: tuple[float, float | None, str | None] | None = None

    async def __call__(self, value: float, total: float | None, message: str | None) -> None:
        if self._sending:
            self._latest = (value, total, message)
            return
        self._sending = True
        try:
            report: tuple[float, float | None, str | None] | None = (value, total, message)
            while report is not None:
                await self._report(*report)
                report, self._latest = self._latest, None
        finally:
            self._sending = False


class SessionChannel(Relaying):
    """The back channel of one handshake-era downstream request (`BackChannel`)."""

    handshake_era = True

    def __init__(self, ctx: RequestContext, level: LevelOf) -> None:
        self.ctx = ctx
        self._level = level
        self.progress = LatestProgress(ctx.session.report_progress)

    @property
    def capabilities(self) -> types.ClientCapabilities:
        return self.ctx.session.client_capabilities or types.ClientCapabilities()

    async def _relay(self, request: types.InputRequest, key: str | None) -> Any:
        refused = refusal(self.ctx, request)
        if refused is not None:
            return refused
        metadata = ServerMessageMetadata(related_request_id=self.ctx.request_id)
        return await _ask(lambda: self.ctx.session.send_request(request, answer_type(request), metadata=metadata))

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        if admits(self._level(), params.level):
            await self.ctx.session.send_notification(log_notification(server, params),
                                                     related_request_id=self.ctx.request_id)
