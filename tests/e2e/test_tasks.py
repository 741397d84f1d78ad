"""Tasks through toolbridge (issue 22, `io.modelcontextprotocol/tasks`): a task-making upstream over stdio
and HTTP, `toolbridge serve` over stdio and HTTP, downstream clients with and without the extension,
and two replicas sharing Redis."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from conftest import free_port, needs, serve_app
from fleetdir import serve_http, serve_stdio
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from servers import tasks_server
from servers.cluster import nginx, redis_server, replica
from servers.tasks_server import CreatedTask, TaskClient, TaskState, cancel, poll, update

pytestmark = pytest.mark.anyio

TASKS_SERVER = str(Path(tasks_server.__file__))
TOOLSETS = {"core": ["jobs__slow", "jobs__forever", "jobs__fail", "jobs__doomed", "jobs__cancelled"],
            "startup_wait": 20}


def write_config(directory: Path, upstream: dict[str, Any]) -> Path:
    (directory / "upstreams").mkdir(parents=True, exist_ok=True)
    (directory / "upstreams" / "jobs.yaml").write_text(yaml.safe_dump({"connect_timeout": 20, **upstream}))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump(TOOLSETS))
    return directory


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config", {"command": sys.executable, "args": [TASKS_SERVER]})


@asynccontextmanager
async def proxied(config: Path, transport: str = "stdio", *, tasks: bool = True, mode: str = "auto",
                  name: str = "ide", **options: Any) -> AsyncIterator[Client]:
    extensions = [TaskClient()] if tasks else None
    info = types.Implementation(name=name, version="1")
    if transport == "stdio":
        async with Client(serve_stdio(config), mode=mode, extensions=extensions, client_info=info,
                          **options) as client:
            yield client
        return
    async with serve_http(config, free_port()) as base, \
            Client(streamable_http_client(f"{base}/mcp"), mode=mode, extensions=extensions, client_info=info,
                   **options) as client:
        yield client


async def start(client: Client, name: str, arguments: dict[str, Any] | None = None) -> CreatedTask:
    created = await client.session.call_tool(name, arguments or {}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created


async def until(client: Client, task_id: str, *statuses: str) -> TaskState:
    with anyio.fail_after(15):
        while (state := await poll(client.session, task_id)).status not in statuses:
            await anyio.sleep(0.05)
    return state


def text(result: dict[str, Any] | types.CallToolResult) -> str:
    if isinstance(result, types.CallToolResult):
        return result.content[0].text  # type: ignore[union-attr]
    return result["content"][0]["text"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_task_is_created_polled_to_its_result_and_its_id_is_toolbridges(config: Path, transport: str) -> None:
    async with proxied(config, transport) as client:
        created = await start(client, "jobs__slow", {"seconds": 0.3})
        assert created.status == "working" and not created.task_id.startswith("task-")
        assert (await poll(client.session, created.task_id)).status == "working"
        state = await until(client, created.task_id, "completed")
        assert text(state.result or {}) == "slept 0.3" and state.task_id == created.task_id


async def test_a_task_is_cancelled_and_a_failed_one_carries_its_error(config: Path) -> None:
    async with proxied(config) as client:
        created = await start(client, "jobs__forever")
        await cancel(client.session, created.task_id)
        assert (await until(client, created.task_id, "cancelled")).status == "cancelled"
        failed = await until(client, (await start(client, "jobs__fail")).task_id, "failed")
        assert failed.error == {"code": -32603, "message": "the job broke"}


async def test_a_deferred_tool_called_through_tool_call_hands_over_its_task_and_takes_input(config: Path) -> None:
    async with proxied(config) as client:
        created = await start(client, "tool_call", {"name": "jobs__ask", "arguments": {}})
        asking = await until(client, created.task_id, "input_required")
        assert asking.input_requests is not None and asking.input_requests["name"]["method"] == "elicitation/create"
        await update(client.session, created.task_id, {"name": {"action": "accept", "content": {"name": "Ada"}}})
        assert text((await until(client, created.task_id, "completed")).result or {}) == "hello Ada"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_without_the_extension_gets_the_final_result_with_progress(config: Path, mode: str) -> None:
    messages: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    async with proxied(config, tasks=False, mode=mode) as client:
        result = await client.call_tool("jobs__slow", {"seconds": 0.5}, progress_callback=progress)
        assert text(result) == "slept 0.5" and "sleeping" in messages  # the upstream made a task; toolbridge waited
        failed = await client.call_tool("jobs__fail", {})
        assert failed.is_error and "the job broke" in text(failed)


async def test_a_waited_task_past_the_servers_timeout_is_cancelled_upstream(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", {"command": sys.executable, "args": [TASKS_SERVER], "timeout": 1})
    async with proxied(config, tasks=False) as client:
        await client.list_tools()  # the fleet is up: what follows is bounded by the call alone
        with anyio.fail_after(15):
            result = await client.call_tool("jobs__forever", {})
        assert result.is_error and "no answer within 1 s; cancelled" in text(result)
        assert text(await client.call_tool("jobs__cancelled", {})) == "1"


async def test_a_waited_task_that_needs_input_asks_the_client(config: Path) -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async with proxied(config, tasks=False, mode="legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool("tool_call", {"name": "jobs__ask", "arguments": {}})
        assert text(result) == "hello Grace"


async def test_task_requests_without_the_extension_or_with_a_foreign_id_are_refused(config: Path) -> None:
    async with serve_http(config, free_port()) as base:
        url = f"{base}/mcp"
        info = types.Implementation(name="ide", version="1")
        async with Client(streamable_http_client(url), extensions=[TaskClient()], client_info=info) as client:
            created = await start(client, "jobs__forever")
            forged = created.task_id[:-2] + ("AA" if not created.task_id.endswith("AA") else "BB")
            with pytest.raises(MCPError) as refused:
                await poll(client.session, forged)
            assert refused.value.code == types.INVALID_PARAMS
        other = types.Implementation(name="other-ide", version="1")
        async with Client(streamable_http_client(url), extensions=[TaskClient()], client_info=other) as client:
            # Without per-user tokens every sessionless client is the one anonymous principal: a client's
            # name never picks an owner (tests/redteam: another OAuth user is refused).
            assert (await poll(client.session, created.task_id)).task_id == created.task_id
        async with Client(streamable_http_client(url), client_info=info) as client:
            with pytest.raises(MCPError) as refused:
                await poll(client.session, created.task_id)
            assert refused.value.code == -32021


async def test_an_upstream_restart_mid_task_is_a_clear_error_and_nothing_hangs(config: Path) -> None:
    async with proxied(config) as client:
        created = await start(client, "jobs__doomed", {"seconds": 0.3})
        with anyio.fail_after(20), pytest.raises(MCPError) as lost:
            while True:
                await poll(client.session, created.task_id)
                await anyio.sleep(0.05)
        assert lost.value.code in (types.INTERNAL_ERROR, types.INVALID_PARAMS)
    async with proxied(config, tasks=False) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("jobs__doomed", {"seconds": 0.3})
        assert result.is_error and "jobs" in text(result)


@needs("redis-server")
async def test_two_replicas_sharing_redis_poll_and_cancel_each_others_tasks(tmp_path: Path) -> None:
    async with serve_app(tasks_server.http_app()) as upstream, redis_server(tmp_path / "redis") as redis:
        config = write_config(tmp_path / "config", {"url": f"{upstream}/mcp"})
        async with serve_http(config, free_port(), "--redis-url", redis) as first, \
                serve_http(config, free_port(), "--redis-url", redis) as second:
            info = types.Implementation(name="ide", version="1")
            async with Client(streamable_http_client(f"{first}/mcp"), extensions=[TaskClient()],
                              client_info=info) as one, \
                    Client(streamable_http_client(f"{second}/mcp"), extensions=[TaskClient()],
                           client_info=info) as two:
                slow = await start(one, "jobs__slow", {"seconds": 0.3})
                assert text((await until(two, slow.task_id, "completed")).result or {}) == "slept 0.3"
                forever = await start(two, "jobs__forever")
                await cancel(one.session, forever.task_id)
                assert (await until(two, forever.task_id, "cancelled")).status == "cancelled"


@needs("nginx", "redis-server")
async def test_behind_nginx_a_stdio_upstreams_task_is_routed_home_by_its_id(config: Path, tmp_path: Path) -> None:
    """deploy/nginx.conf routes tasks/* on Mcp-Name (the task id, led by its replica's id): every poll
    of a task living in one replica's stdio child reaches that replica, whichever one made it."""
    ports = {"toolbridge-0": free_port(), "toolbridge-1": free_port()}
    async with redis_server(tmp_path / "redis") as redis, AsyncExitStack() as stack:
        for replica_id, port in ports.items():
            await stack.enter_async_context(replica(config, port, replica_id, "--redis-url", redis))
        targets = [*ports.items(), ("toolbridge-2", ports["toolbridge-1"])]  # the template names three
        base = await stack.enter_async_context(nginx(tmp_path / "nginx", targets))
        async with Client(streamable_http_client(f"{base}/mcp"), extensions=[TaskClient()]) as client:
            homes = set()
            for _ in range(4):
                created = await start(client, "jobs__slow", {"seconds": 0.3})
                homes.add(created.task_id.split(".")[0])
                for _ in range(6):  # round-robin would send some of these to the other replica
                    assert (await poll(client.session, created.task_id)).status in ("working", "completed")
                assert text((await until(client, created.task_id, "completed")).result or {}) == "slept 0.3"
            assert homes <= set(ports)
