"""The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28) on upstream connections.

An upstream may answer a `tools/call` with a task (`resultType: "task"`) instead of a result, to
a client that declared the extension on that request. Every 2026-era upstream connection declares
it: the SDK stamps the connection's capabilities on every request it sends (a caller's `_meta`
cannot change them), and one connection carries the calls of every downstream session. What the
downstream caller declared decides instead what becomes of a task the upstream makes:

- it declared the extension (its back channel `takes_tasks`): the task is handed to it (`HandedOver`), and its
  `tasks/get|update|cancel` go to the upstream through `get_task`, `update_task`, `cancel_task`;
- it did not: toolbridge waits for the task here, polling `tasks/get` at the upstream's interval,
  passing status messages on as progress and input requests on through the call's back channel, so
  the caller gets the final result as from any call. Cancelling the call cancels the task.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import MCPError, types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from pydantic import TypeAdapter, ValidationError

from proxy.protocol import (
    TASKS,
    BackChannel,
    CreatedTask,
    HandedOver,
    ProgressCallback,
    TaskState,
    cancel_task,
    get_task,
    update_task,
)

__all__ = ["TasksExtension", "task_call"]

TERMINAL = frozenset({"completed", "failed", "cancelled"})
POLL_INTERVAL = (0.05, 5.0, 1.0)  # seconds: the least, the most and the default between two polls
CANCEL_WAIT = 5.0  # how long a cancelled wait spends telling the upstream


# --- one call's way with a task --------------------------------------------------------------------



@dataclass
class _TaskCall:
    server: str
    hand_over: bool
    progress: ProgressCallback | None
    channel: BackChannel | None


_current: ContextVar[_TaskCall | None] = ContextVar("task_call", default=None)


@contextlib.contextmanager
def task_call(server: str, progress: ProgressCallback | None, channel: BackChannel | None) -> Iterator[None]:
    """Around one upstream `tools/call`: what becomes of a task it makes (see the module docstring)."""
    token = _current.set(_TaskCall(server, channel is not None and channel.takes_tasks, progress, channel))
    try:
        yield
    finally:
        _current.reset(token)


async def _resolve(created: CreatedTask, context: ClaimContext) -> types.CallToolResult:
    call = _current.get() or _TaskCall("", False, None, None)
    if call.hand_over:
        return HandedOver.of(call.server, created)
    ended = False
    try:
        state = await _wait(context.session, created.task_id, call, context.read_timeout_seconds)
        ended = True
    finally:
        if not ended:  # cancelled, timed out or cut off: the upstream need not go on
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WAIT), \
                    contextlib.suppress(Exception):
                await cancel_task(context.session, created.task_id)
    return _final(state)


async def _wait(session: ClientSession, task_id: str, call: _TaskCall, timeout: float | None) -> TaskState:
    """Poll the task to its end within `timeout` (the server's per-call timeout).

    Raises:
        MCPError: no end within `timeout`, or the upstream failed a `tasks/get`.
    """
    answered: set[str] = set()
    least, most, default = POLL_INTERVAL
    with anyio.move_on_after(timeout if timeout is not None else math.inf):
        for polls in itertools.count(1):
            state = await get_task(session, task_id, timeout)
            if state.status in TERMINAL:
                return state
            if call.progress is not None and state.status_message:
                await call.progress(float(polls), None, state.status_message)
            if state.status == "input_required" and state.input_requests:
                await _answer_inputs(session, state, call.channel, answered)
            interval = state.poll_interval_ms / 1000 if state.poll_interval_ms is not None else default
            await anyio.sleep(min(max(interval, least), most))
    raise MCPError(types.REQUEST_TIMEOUT, f"the task did not finish within {timeout:g} s; cancelled")


def _final(state: TaskState) -> types.CallToolResult:
    """A terminal task as the call's answer: its result, its error raised, or a cancelled note."""
    if state.status == "completed" and state.result is not None:
        try:
            return types.CallToolResult.model_validate(state.result, by_name=False)
        except ValidationError as exc:
            raise MCPError(types.INTERNAL_ERROR, "the task's result is not a tool result") from exc
    if state.status == "failed" and state.error is not None:
        try:
            raise MCPError.from_error_data(types.ErrorData.model_validate(state.error))
        except ValidationError:
            pass
    reason = f": {state.status_message}" if state.status_message else ""
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"the task {state.status}{reason}")],
                                is_error=True)


_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


async def _answer_inputs(
    session: ClientSession, state: TaskState, channel: BackChannel | None, answered: set[str]
) -> None:
    """Ask the caller, through the call's back channel, what the task needs; send what it says."""
    responses: dict[str, Any] = {}
    for key, raw in (state.input_requests or {}).items():
        if key in answered:
            continue
        answered.add(key)
        try:
            request = _INPUT_REQUEST.validate_python(raw, by_name=False)
        except ValidationError:
            continue
        answer = await _ask(channel, request, key)
        if not isinstance(answer, types.ErrorData):
            responses[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    if responses:
        await update_task(session, state.task_id, responses)


async def _ask(channel: BackChannel | None, request: types.InputRequest, key: str) -> Any:
    if channel is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message="no caller to ask")
    if isinstance(request, types.ElicitRequest):
        return await channel.elicit(request.params, key)
    if isinstance(request, types.CreateMessageRequest):
        return await channel.sample(request.params, key)
    return await channel.list_roots(key)


class TasksExtension(ClientExtension):
    """Declares the tasks extension on a 2026-era upstream connection and takes its task results."""

    identifier = TASKS

    def claims(self) -> tuple[ResultClaim[CreatedTask], ...]:
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=_resolve),)
