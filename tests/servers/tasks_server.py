"""An upstream that makes tasks (`io.modelcontextprotocol/tasks`, 2026-07-28), and a client side for tests.

Run over stdio (`python tasks_server.py`) or serve `http_app()`. A `tools/call` becomes a task only
when the request declares the extension; otherwise the tool answers at once (`slow` sleeps first).
A task's status follows the clock, so nothing runs in the background:

- `slow {seconds}`: working (status message "sleeping") until `seconds` have passed, then completed;
- `forever`: working until cancelled;
- `ask`: input_required (a form elicitation asking for a name) until `tasks/update` answers it;
- `fail`: failed at once with a JSON-RPC error;
- `doomed {seconds}`: like `slow`, but the first `tasks/get` after `seconds` ends the process;
- `cancelled` (never a task): how many tasks were cancelled so far.

`TaskClient` is what a downstream test client needs: the extension declared, a task result kept as
is, and `tasks/get|update|cancel`.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any, Literal

import anyio
from mcp import types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.server.lowlevel import Server

TASKS = "io.modelcontextprotocol/tasks"
_ids = itertools.count(1)
_tasks: dict[str, dict[str, Any]] = {}
calls: list[str] = []


def _tool(name: str, **properties: str) -> types.Tool:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}
    return types.Tool(name=name, description=f"The {name} task tool.", input_schema=schema)


TOOLS = [_tool("slow", seconds="number"), _tool("forever"), _tool("ask"), _tool("fail"),
         _tool("doomed", seconds="number"), _tool("cancelled")]


def _text(text: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _declared(ctx: Any) -> bool:
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and TASKS in (capabilities.extensions or {})


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _state(task: dict[str, Any]) -> dict[str, Any]:
    """The task's `DetailedTask` now."""
    body = {"taskId": task["id"], "createdAt": task["created"], "lastUpdatedAt": _stamp(), "ttlMs": 60_000,
            "pollIntervalMs": 50}
    kind, elapsed = task["kind"], time.monotonic() - task["started"]
    if task["cancelled"]:
        return {**body, "status": "cancelled"}
    if kind == "fail":
        return {**body, "status": "failed", "statusMessage": "it broke",
                "error": {"code": -32603, "message": "the job broke"}}
    if kind == "ask":
        if task["name"] is None:
            return {**body, "status": "input_required", "inputRequests": {"name": {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": "Your name?", "requestedSchema": {
                    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}}}
        return {**body, "status": "completed", "result": _text(f"hello {task['name']}")}
    if kind == "doomed" and elapsed >= task["seconds"]:
        os._exit(3)
    if kind == "forever" or elapsed < task["seconds"]:
        return {**body, "status": "working", "statusMessage": "sleeping"}
    return {**body, "status": "completed", "result": _text(f"slept {task['seconds']:g}")}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
    calls.append(params.name)
    seconds = float((params.arguments or {}).get("seconds", 0))
    if params.name == "cancelled":
        count = sum(task["cancelled"] for task in _tasks.values())
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(count))])
    if not _declared(ctx):
        await anyio.sleep(seconds)
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"no task: {params.name}")])
    task_id = f"task-{next(_ids)}"
    _tasks[task_id] = {"id": task_id, "kind": params.name, "seconds": seconds, "started": time.monotonic(),
                       "created": _stamp(), "cancelled": False, "name": None}
    state = _state(_tasks[task_id])
    return {**{k: v for k, v in state.items() if k in ("taskId", "status", "statusMessage", "createdAt",
                                                         "lastUpdatedAt", "ttlMs", "pollIntervalMs")},
            "resultType": "task"}


class TaskIdParams(types.RequestParams):
    task_id: str


class TaskUpdateParams(TaskIdParams):
    input_responses: dict[str, Any]


def _task(params: TaskIdParams) -> dict[str, Any]:
    task = _tasks.get(params.task_id)
    if task is None:
        from mcp import MCPError

        raise MCPError(types.INVALID_PARAMS, "Failed to retrieve task: Task not found")
    return task


async def get_task(ctx: Any, params: TaskIdParams) -> dict[str, Any]:
    return _state(_task(params))


async def update_task(ctx: Any, params: TaskUpdateParams) -> dict[str, Any]:
    task = _task(params)
    answer = params.input_responses.get("name") or {}
    if answer.get("action") == "accept":
        task["name"] = (answer.get("content") or {}).get("name")
    return {}


async def cancel_task(ctx: Any, params: TaskIdParams) -> dict[str, Any]:
    _task(params)["cancelled"] = True
    return {}


def server() -> Server[Any]:
    built = Server("tasks", on_list_tools=list_tools, on_call_tool=call_tool)
    built.extensions[TASKS] = {}
    built.add_request_handler("tasks/get", TaskIdParams, get_task)
    built.add_request_handler("tasks/update", TaskUpdateParams, update_task)
    built.add_request_handler("tasks/cancel", TaskIdParams, cancel_task)
    return built


def http_app() -> Any:
    return server().streamable_http_app()


# --- the downstream test client's side -----------------------------------------------------------


class CreatedTask(types.Result):
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskState(types.Result):
    result_type: str = "complete"
    task_id: str
    status: str
    status_message: str | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class _Get(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class _Update(types.Request[TaskUpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: TaskUpdateParams
    name_param = "taskId"


class _Cancel(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


async def _unresolved(result: CreatedTask, context: ClaimContext) -> types.CallToolResult:
    raise AssertionError("tests take tasks through session.call_tool(allow_claimed=True)")


class TaskClient(ClientExtension):
    """Declares the extension for a test client (`Client(..., extensions=[TaskClient()])`)."""

    identifier = TASKS

    def claims(self) -> tuple[ResultClaim[CreatedTask], ...]:
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=_unresolved),)


async def poll(session: Any, task_id: str) -> TaskState:
    return await session.send_request(_Get(params=TaskIdParams(task_id=task_id)), TaskState)


async def update(session: Any, task_id: str, responses: dict[str, Any]) -> None:
    await session.send_request(_Update(params=TaskUpdateParams(task_id=task_id, input_responses=responses)),
                               types.EmptyResult)


async def cancel(session: Any, task_id: str) -> None:
    await session.send_request(_Cancel(params=TaskIdParams(task_id=task_id)), types.EmptyResult)


async def _main() -> None:
    from mcp.server.stdio import stdio_server

    built = server()
    async with stdio_server() as (read, write):
        await built.run(read, write, built.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_main)
