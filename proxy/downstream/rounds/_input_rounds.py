"""A 2026-era downstream request's way back: `InputRequiredResult` rounds.

A 2026-07-28 client has no back-channel: when the upstream asks for sampling, elicitation or roots
during a `tools/call`, `prompts/get` or `resources/read`, toolbridge answers the downstream request
with an `InputRequiredResult` carrying those requests and an opaque `requestState`, and the client
sends the request again with the answers. So the upstream request runs in a background task that
outlives one downstream request: each downstream round waits for it to finish or to need input.

Each input request keeps the key the upstream gave it (a 2026-era upstream names them; a handshake-era
one's requests, or a key already waiting in this call, get `toolbridge-N`), so a client answering the
key the server asked for is understood. Each round has a `requestState` of its own, sealed, naming the
round and its owner — the principal that started the call, in the profile it was started in
(`rounds/_request_state`): only that owner can answer, only with the request it asked with (the method and the
tool, prompt or resource it names), and only the latest round (an earlier round's state is refused once a later
one was handed out). A call nobody comes back for gives the upstream an error after
`ANSWER_TIMEOUT` and is then forgotten; one whose client gave up on a round (cancelled it, or dropped its
request) is cancelled upstream.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.abc
from mcp import MCPError, types
from mcp.server.connection import allowed_log_levels
from pydantic import ValidationError

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
    owner: str
    request: tuple[str, str | None]  # what was asked: the method and the tool, prompt or resource it names
    ctx: RequestContext
    round: str | None = None  # what the latest round's requestState seals; None until the request needs input
    new: dict[str, _Waiter] = field(default_factory=dict)
    asked: dict[str, _Waiter] = field(default_factory=dict)
    offered: dict[str, Any] = field(default_factory=dict)  # answers sent before any round, by key: each used once
    result: Any = None
    error: Exception | None = None
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
                waiter.answer = _as_answer_to(waiter.request, responses[key])
                waiter.answered.set()
            else:
                self.new[key] = waiter
        self.asked.clear()

    def take_offered(self, key: str | None, request: types.InputRequest) -> Any:
        """The answer offered up front under `key`, if it fits `request` (else the question is asked)."""
        offered = self.offered.pop(key, None) if key is not None else None
        if offered is None:
            return None
        try:
            return _as_answer_to(request, offered)
        except ValidationError:
            return None

    def waiting(self, key: str) -> bool:
        return key in self.new or key in self.asked


class RoundTripChannel(Relaying):
    """The back channel of one 2026-era downstream request (`BackChannel`)."""

    def __init__(self, pending: _Pending) -> None:
        self._pending = pending
        self.takes_tasks = takes_tasks(pending.ctx)
        self._keys = itertools.count(1)
        self.progress = LatestProgress(self._report)

    @property
    def capabilities(self) -> types.ClientCapabilities:
        return self._pending.ctx.session.client_capabilities or types.ClientCapabilities()

    def _key(self, key: str | None) -> str:
        """The upstream's own key, unless it has none or that key is already waiting in this call."""
        while key is None or self._pending.waiting(key):
            key = f"toolbridge-{next(self._keys)}"
        return key

    async def _relay(self, request: types.InputRequest, key: str | None) -> Any:
        pending = self._pending
        refused = refusal(pending.ctx, request)
        if refused is not None:
            return refused
        offered = pending.take_offered(key, request)
        if offered is not None:
            return offered
        waiter, key = _Waiter(request), self._key(key)
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


def _as_answer_to(request: types.InputRequest, response: Any) -> Any:
    raw = response.model_dump(by_alias=True, exclude_none=True)
    return answer_type(request).model_validate(raw, by_name=False)


R = TypeVar("R")
Run = Callable[[RoundTripChannel], Awaitable[R]]


def _named(params: types.InputResponseRequestParams) -> str | None:
    """The tool, prompt or resource a request names: a state resumes only the request it was given for."""
    if isinstance(params, (types.CallToolRequestParams, types.GetPromptRequestParams)):
        return params.name
    if isinstance(params, types.ReadResourceRequestParams):
        return str(params.uri)
    return None


class RoundTrips:
    """The 2026-era requests in flight across downstream requests, by the round their `requestState` seals."""

    def __init__(self, states: RequestStates) -> None:
        self._states = states
        self._pending: dict[str, _Pending] = {}  # by the latest round, from the first time a request needs input
        self._tg: anyio.abc.TaskGroup | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host the background requests until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    async def call(
        self, ctx: RequestContext, owner: str, params: types.InputResponseRequestParams, run: Run[R]
    ) -> R | types.InputRequiredResult:
        """Start `run` for `owner` (its principal `in_profile`), or, with a `requestState`, resume it with the
        client's answers, and wait for its result or its next input requests.

        Raises:
            MCPError: the `requestState` was altered, is another owner's, another request's or an
                earlier round's, or its request is over; or what `run` raised.
        """
        request = (ctx.method, _named(params))
        if params.request_state is not None:
            pending = self._pending.get(self._states.open(params.request_state, owner))
            if pending is None or pending.request != request:
                raise MCPError(types.INVALID_PARAMS, "toolbridge: unknown or expired requestState")
            pending.ctx = ctx
            pending.answer(dict(params.input_responses or {}))
        else:
            assert self._tg is not None, "RoundTrips.run is not running"
            pending = _Pending(owner, request, ctx, offered=dict(params.input_responses or {}))
            self._tg.start_soon(self._run, pending, run)
        return await self._next(pending)

    async def _run(self, pending: _Pending, run: Run[Any]) -> None:
        try:
            with pending.scope:
                pending.result = await run(RoundTripChannel(pending))
        except Exception as exc:  # the round that collects the request raises it
            pending.error = exc
        finally:
            pending.finished = True
            pending.poke()
        if pending.round is None:
            return  # never needed input: the round that started it is waiting for the result
        try:
            if not pending.rounds_waiting:  # else a waiting round collects it (or was cancelled, and so is the call)
                with anyio.move_on_after(_COLLECT_TIMEOUT):
                    await pending.collected.wait()
        finally:
            self._pending.pop(pending.round, None)

    def _hand_out(self, pending: _Pending) -> types.InputRequiredResult:
        """The next round: the requests not yet asked, under a state of this round's own."""
        if pending.round is not None:
            self._pending.pop(pending.round, None)
        pending.round = secrets.token_urlsafe(16)
        self._pending[pending.round] = pending
        handed, pending.new = pending.new, {}
        pending.asked.update(handed)
        return types.InputRequiredResult(input_requests={key: waiter.request for key, waiter in handed.items()},
                                         request_state=self._states.seal(pending.round, pending.owner))

    async def _next(self, pending: _Pending) -> Any:
        pending.rounds_waiting += 1
        try:
            while True:
                if pending.finished:
                    pending.collected.set()
                    if pending.error is not None:
                        raise pending.error
                    if pending.result is None:
                        raise MCPError(types.INTERNAL_ERROR, "toolbridge: the request ended without a result")
                    return pending.result
                if pending.new:
                    return self._hand_out(pending)
                await pending.changed.wait()
        except anyio.get_cancelled_exc_class():
            pending.scope.cancel()  # the client gave up on this call
            raise
        finally:
            pending.rounds_waiting -= 1
