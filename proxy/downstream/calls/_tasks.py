"""Tasks through the proxy (`io.modelcontextprotocol/tasks`): the ids handed downstream, and `tasks/*`.

A task is handed to a downstream caller only when its request declared the extension (`declared`);
otherwise the upstream layer waits for it (`proxy.upstream.connection._task_waiting`). The id the caller gets is
`<replica>.<payload>.<signature>`: the payload names the server, the upstream's own id and a digest
of the caller's owner and profile; the HMAC signature, under a key every replica sharing Redis shares, makes
it unforgeable, so one principal can never poll, answer or cancel another's task — nor the same one from
another profile, where the task's tool may be out of scope — and no upstream id is trusted unless toolbridge
minted it. The replica prefix lets a load balancer route `tasks/*` home
by the `Mcp-Name` header (the client sets it to the task id), as session ids are routed; a replica
that gets another's task answers it when the upstream is a remote one (every replica reaches the
same server), and refuses it clearly when the task lives in the other replica's stdio child.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp import MCPError, types
from pydantic import ValidationError

from proxy.downstream.session import (
    RequestContext,
    Upstreams,
    caller,
    in_profile,
    protocol_error,
    scrub_error_result,
    takes_tasks,
)
from proxy.errors import ToolbridgeError
from proxy.protocol import (
    TASKS,
    CreatedTask,
    HandedOver,
    TaskState,
    cancel_task,
    get_task,
    strip_server_info,
    update_task,
)

__all__ = ["TaskIdParams", "TaskIds", "TaskUpdateParams", "Tasks", "new_replica_id"]

MISSING_CAPABILITY = -32021  # Missing Required Client Capability (the extension's error code)
MAX_UPSTREAM_ID = 256  # characters of an upstream's task id toolbridge carries
_SIGNATURE_BYTES = 16


class TaskIdParams(types.RequestParams):
    task_id: str


class TaskUpdateParams(TaskIdParams):
    input_responses: dict[str, Any]


@dataclass(frozen=True)
class TaskRef:
    replica: str
    server: str
    upstream_id: str
    owner: str  # the digest of the caller's owner in its profile


def new_replica_id() -> str:
    """A process's own replica id when none is configured (a DNS label, as `--replica-id` is)."""
    return "r" + secrets.token_hex(4)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TaskIds:
    """Mints and opens the task ids handed downstream."""

    def __init__(self, key: bytes, replica: str) -> None:
        self._key = key
        self.replica = replica

    def digest(self, owner: str) -> str:
        return _b64(hmac.new(self._key, b"owner\0" + owner.encode(), hashlib.sha256).digest()[:12])

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, b"task\0" + body.encode(), hashlib.sha256).digest()[:_SIGNATURE_BYTES])

    def mint(self, server: str, upstream_id: str, owner: str) -> str:
        payload = _b64(json.dumps([server, upstream_id, self.digest(owner)]).encode())
        body = f"{self.replica}.{payload}"
        return f"{body}.{self._sign(body)}"

    def open(self, task_id: str) -> TaskRef | None:
        """The task an id names, or None when toolbridge did not mint it (or it was altered)."""
        replica, _, rest = task_id.partition(".")
        payload, _, signature = rest.partition(".")
        if not hmac.compare_digest(self._sign(f"{replica}.{payload}"), signature):
            return None
        try:
            server, upstream_id, owner = json.loads(_unb64(payload))
        except (ValueError, binascii.Error, TypeError):
            return None
        return TaskRef(replica, str(server), str(upstream_id), str(owner))


def _missing_capability() -> MCPError:
    return MCPError(MISSING_CAPABILITY, "Missing required client capability",
                    {"requiredCapabilities": {"extensions": {TASKS: {}}}})


class Tasks:
    """The downstream side of tasks: handles for created tasks, and `tasks/get|update|cancel` in a profile.

    `shared(server)` says whether every replica reaches the same `server` (a remote upstream).
    """

    def __init__(self, upstreams: Upstreams, ids: TaskIds, shared: Callable[[str], bool] = lambda _: False) -> None:
        self.upstreams = upstreams
        self.ids = ids
        self.shared = shared

    @classmethod
    def alone(cls, upstreams: Upstreams) -> Tasks:
        """For a process that shares nothing: its own key and replica id."""
        return cls(upstreams, TaskIds(secrets.token_bytes(32), new_replica_id()))

    def handle(self, ctx: RequestContext, profile: str, handed: HandedOver) -> dict[str, Any]:
        """The `CreateTaskResult` the caller gets for a task its call in `profile` became upstream."""
        created = handed.created
        if len(created.task_id) > MAX_UPSTREAM_ID:
            raise MCPError(types.INTERNAL_ERROR, f"toolbridge: server {handed.server} made a task with an "
                                                 f"id over {MAX_UPSTREAM_ID} characters")
        task_id = self.ids.mint(handed.server, created.task_id, in_profile(caller(ctx).owner, profile))
        return _wire(created, task_id)

    def _ref(self, ctx: RequestContext, profile: str, task_id: str) -> TaskRef:
        """The caller's task `task_id` names, made in `profile`.

        Raises:
            MCPError: the request did not declare the extension; the id is not one toolbridge
                minted for this owner in this profile; or the task lives in another replica's stdio child.
        """
        if not takes_tasks(ctx):
            raise _missing_capability()
        ref = self.ids.open(task_id)
        if ref is None or not hmac.compare_digest(ref.owner, self.ids.digest(in_profile(caller(ctx).owner, profile))):
            raise MCPError(types.INVALID_PARAMS, "toolbridge: unknown task")
        if ref.replica != self.ids.replica and not self.shared(ref.server):
            raise MCPError(types.INVALID_PARAMS, f"toolbridge: the task is held by replica {ref.replica} "
                                                 "(route tasks/* on the Mcp-Name header's replica prefix)")
        return ref

    async def get(self, ctx: RequestContext, profile: str, params: TaskIdParams) -> dict[str, Any]:
        ref = self._ref(ctx, profile, params.task_id)
        state = await self._upstream(ref, "tasks/get", lambda session: get_task(session, ref.upstream_id))
        return _wire(state, params.task_id)

    async def update(self, ctx: RequestContext, profile: str, params: TaskUpdateParams) -> types.EmptyResult:
        ref = self._ref(ctx, profile, params.task_id)
        responses = params.input_responses
        await self._upstream(ref, "tasks/update", lambda session: update_task(session, ref.upstream_id, responses))
        return types.EmptyResult()

    async def cancel(self, ctx: RequestContext, profile: str, params: TaskIdParams) -> types.EmptyResult:
        ref = self._ref(ctx, profile, params.task_id)
        await self._upstream(ref, "tasks/cancel", lambda session: cancel_task(session, ref.upstream_id))
        return types.EmptyResult()

    async def _upstream(self, ref: TaskRef, what: str, operation: Callable[[Any], Any]) -> Any:
        try:
            return await self.upstreams.request(ref.server, what, lambda client: operation(client.session))
        except ToolbridgeError as exc:
            raise protocol_error(exc) from exc


def _wire(task: CreatedTask | TaskState, task_id: str) -> dict[str, Any]:
    """The task as the caller sees it: toolbridge's id, the upstream's result without its identity stamp."""
    body = task.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"meta"})
    body["taskId"] = task_id
    if isinstance(task, TaskState) and task.result is not None:
        try:
            result = types.CallToolResult.model_validate(task.result, by_name=False)
        except ValidationError:
            body.pop("result")
            body.update(status="failed", error={"code": types.INTERNAL_ERROR,
                                                "message": "toolbridge: the task's result is not a tool result"})
        else:
            result = scrub_error_result(strip_server_info(result))  # as a call's own result is
            body["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if "ttlMs" not in body:
        body["ttlMs"] = None  # required on the wire: null is unlimited
    return body
