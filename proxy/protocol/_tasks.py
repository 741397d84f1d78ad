"""The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28): its results and requests.

An upstream may answer a `tools/call` with a task (`resultType: "task"`) instead of a result, which
the client then polls with `tasks/get`, answers with `tasks/update` and stops with `tasks/cancel`.
`HandedOver` is what an upstream call returns when its task goes to the downstream caller.
"""

from __future__ import annotations

from typing import Any, Literal

from mcp import types
from mcp.client.session import ClientSession
from pydantic import PrivateAttr

__all__ = ["TASKS", "CreatedTask", "HandedOver", "TaskBody", "TaskState", "cancel_task", "get_task", "update_task"]

TASKS = "io.modelcontextprotocol/tasks"


class TaskBody(types.Result):
    """The `Task` shape, as an upstream sent it (the fields a client may rely on)."""

    task_id: str
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class CreatedTask(TaskBody):
    """`CreateTaskResult`: the answer to a `tools/call` that became a task."""

    result_type: Literal["task"] = "task"


class TaskState(TaskBody):
    """A `tasks/get` answer (`DetailedTask`): the status with its input requests, result or error."""

    result_type: str = "complete"
    input_requests: dict[str, dict[str, Any]] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class HandedOver(types.CallToolResult):
    """What the call returns when the upstream's task goes to the downstream caller: `created` is it.

    An error result, so nothing reads it as the tool's answer (nor validates it as one).
    """

    _created: CreatedTask | None = PrivateAttr(default=None)
    _server: str = PrivateAttr(default="")

    @classmethod
    def of(cls, server: str, created: CreatedTask) -> HandedOver:
        handed = cls(content=[types.TextContent(type="text", text="toolbridge: task handed over")], is_error=True)
        handed._created, handed._server = created, server
        return handed

    @property
    def created(self) -> CreatedTask:
        assert self._created is not None
        return self._created

    @property
    def server(self) -> str:
        return self._server


class _TaskParams(types.RequestParams):
    task_id: str


class _UpdateParams(_TaskParams):
    input_responses: dict[str, Any]


class _GetTask(types.Request[_TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskParams
    name_param = "taskId"  # Mcp-Name: a load balancer routes a task's requests on it


class _UpdateTask(types.Request[_UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateParams
    name_param = "taskId"


class _CancelTask(types.Request[_TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskParams
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str, timeout: float | None = None) -> TaskState:
    return await session.send_request(_GetTask(params=_TaskParams(task_id=task_id)), TaskState,
                                      request_read_timeout_seconds=timeout)


async def update_task(session: ClientSession, task_id: str, responses: dict[str, Any]) -> None:
    await session.send_request(_UpdateTask(params=_UpdateParams(task_id=task_id, input_responses=responses)),
                               types.EmptyResult)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(_CancelTask(params=_TaskParams(task_id=task_id)), types.EmptyResult)
