"""A 2026-era downstream call's way back: `InputRequiredResult` rounds.

A 2026-07-28 client has no back-channel: when the upstream asks for sampling, elicitation or roots
during the call, toolbridge answers the downstream request with an `InputRequiredResult` carrying
those requests and an opaque `requestState`, and the client calls again with the answers. So the
upstream call runs in a background task that outlives one downstream request: each downstream round
waits for the call to finish or to need input. `requestState` is sealed and names the call and the
principal that started it (`rounds/_request_state`): only that principal can answer for the call. A call
nobody comes back for gives the upstream an error after `ANSWER_TIMEOUT` and is then forgotten; one
whose client gave up on a round (cancelled it, or dropped its request) is cancelled upstream.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from mcp import MCPError, types
from mcp.server.connection import allowed_log_levels

from proxy.downstream.rounds._request_state import RequestStates
from proxy.downstream.rounds._session_channel import LatestProgress, Relaying, answer_type, log_notification, refusal
from proxy.downstream.session import RequestContext, takes_tasks

_COLLECT_TIMEOUT = 60.0  # how long a finished call waits for the round that collects it


@dataclass
class _Waiter:
    request: types.InputRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None


@dataclass
class _Pending:
    principal: str
    ctx: RequestContext
    call: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    state: str | None = None  # sealed when the call first needs input: only then can a round come back
    new: dict[str, _Waiter] = field(default_factory=dict)
    asked: dict[str, _Waiter] = field(default_factory=dict)
    result: types.CallToolResult | None = None
    finished: bool = False
    rounds_waiting: int = 0  # downstream rounds in `_next` now: one of them will collect the result
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    changed: anyio.Event = field(default_factory=anyio.Event)
    collected: anyio.Event = field(default_factory=anyio.Event)

    def poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def answer(self, responses: dict[str, Any]) -> None:
        """Hand each answer to its waiter; requests left unanswered are asked again next round."""
        for key, waiter in list(self.asked.items()):
            if key in responses:
                raw = responses[key].model_dump(by_alias=True, exclude_none=True)
                waiter.answer = answer_type(waiter.request).model_validate(raw, by_name=False)
                waiter.answered.set()
            else:
                self.new[key] = waiter
        self.asked.clear()


class RoundTripChannel(Relaying):
    """The back channel of one 2026-era downstream call (`BackChannel`)."""

    def __init__(self, pending: _Pending) -> None:
        self._pending = pending
        self.takes_tasks = takes_tasks(pending.ctx)
        self._keys = itertools.count(1)
        self.progress = LatestProgress(self._report)

    async def _relay(self, request: types.InputRequest) -> Any:
        pending = self._pending
        refused = refusal(pending.ctx, request)
        if refused is not None:
            return refused
        waiter, key = _Waiter(request), f"toolbridge-{next(self._keys)}"
        pending.new[key] = waiter
        pending.poke()
        try:
            await waiter.answered.wait()
        finally:  # the upstream may give up first (its own timeout): then nobody is to be asked any more
            pending.new.pop(key, None)
            pending.asked.pop(key, None)
        return waiter.answer

    async def _report(self, value: float, total: float | None, message: str | None) -> None:
        await self._pending.ctx.session.report_progress(value, total, message)  # on the round running now

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        ctx = self._pending.ctx
        if params.level in allowed_log_levels(ctx.session.protocol_version, ctx.meta):
            await ctx.session.send_notification(log_notification(server, params), related_request_id=ctx.request_id)


Run = Callable[[RoundTripChannel], Awaitable[types.CallToolResult]]


class RoundTrips:
    """The 2026-era calls in flight across downstream requests, by the call id their `requestState` seals."""

    def __init__(self, states: RequestStates) -> None:
        self._states = states
        self._pending: dict[str, _Pending] = {}  # by call id, from the first time a call needs input
        self._tg: anyio.abc.TaskGroup | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host the background calls until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    async def call(
        self, ctx: RequestContext, principal: str, params: types.CallToolRequestParams, run: Run
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Start `run` (or, with a `requestState`, resume it with the client's answers) and wait for
        its result or its next input requests.

        Raises:
            MCPError: the `requestState` was altered, is another principal's, or its call is over.
        """
        if params.request_state is not None:
            pending = self._pending.get(self._states.open(params.request_state, principal))
            if pending is None:
                raise MCPError(types.INVALID_PARAMS, "toolbridge: unknown or expired requestState")
            pending.ctx = ctx
            pending.answer(dict(params.input_responses or {}))
        else:
            assert self._tg is not None, "RoundTrips.run is not running"
            pending = _Pending(principal, ctx)
            self._tg.start_soon(self._run, pending, run)
        return await self._next(pending)

    async def _run(self, pending: _Pending, run: Run) -> None:
        try:
            with pending.scope:
                pending.result = await run(RoundTripChannel(pending))
        finally:
            pending.finished = True
            pending.poke()
        if pending.state is None:
            return  # never needed input: the round that started it is waiting for the result
        try:
            if not pending.rounds_waiting:  # else a waiting round collects it (or was cancelled, and so is the call)
                with anyio.move_on_after(_COLLECT_TIMEOUT):
                    await pending.collected.wait()
        finally:
            self._pending.pop(pending.call, None)

    async def _next(self, pending: _Pending) -> types.CallToolResult | types.InputRequiredResult:
        pending.rounds_waiting += 1
        try:
            while True:
                if pending.result is not None:
                    pending.collected.set()
                    return pending.result
                if pending.finished:
                    raise MCPError(types.INTERNAL_ERROR, "toolbridge: the call ended without a result")
                if pending.new:
                    if pending.state is None:
                        pending.state = self._states.seal(pending.call, pending.principal)
                        self._pending[pending.call] = pending
                    handed, pending.new = pending.new, {}
                    pending.asked.update(handed)
                    return types.InputRequiredResult(
                        input_requests={key: waiter.request for key, waiter in handed.items()},
                        request_state=pending.state,
                    )
                await pending.changed.wait()
        except anyio.get_cancelled_exc_class():
            pending.scope.cancel()  # the client gave up on this call
            raise
        finally:
            pending.rounds_waiting -= 1
