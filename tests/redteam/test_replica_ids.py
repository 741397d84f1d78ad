"""Ids minted by another replica: two `toolbridge serve` processes on one config dir, without Redis, each
with a key of its own (docs/tasks-and-lists.md: 'Without Redis the key is the process's own: ids verify in
that process only'; docs/security.md, Large results)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import httpx2
import pytest
from conftest import free_port
from mcp import MCPError, types
from rt import SERVERS, client, post, serve_http, tool, upstream, write_config
from servers.tasks_server import TASKS, CreatedTask, TaskClient

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def replicas(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, str]]:
    config = tmp_path_factory.mktemp("replicas") / "config"
    upstreams = {"data": upstream("data", tools=[tool("big", size={"type": "integer"})]),
                 "jobs": {"command": sys.executable, "args": [str(SERVERS / "tasks_server.py")], "connect_timeout": 30}}
    write_config(config, upstreams, {"core": ["data__big", "jobs__forever"], "large_results": {"max_chars": 1_000},
                                     "startup_wait": 30})
    async with serve_http(config, free_port(), "--replica-id", "r0", ready=(200,)) as first, \
            serve_http(config, free_port(), "--replica-id", "r1", ready=(200,)) as second:
        yield f"{first}/mcp", f"{second}/mcp"


async def test_a_task_id_minted_by_another_replica_is_refused(replicas: tuple[str, str]) -> None:
    """Attacks 'ids verify in that process only': r1 must not act on r0's task id, nor on one relabelled as its own."""
    first, second = replicas
    async with client(first, extensions=[TaskClient()]) as c:
        created = await c.session.call_tool("jobs__forever", {}, allow_claimed=True)
    assert isinstance(created, CreatedTask) and created.task_id.startswith("r0.")
    relabelled = "r1." + created.task_id.split(".", 1)[1]
    async with httpx2.AsyncClient(timeout=30) as http:
        for task_id in (created.task_id, relabelled):
            for method in ("tasks/get", "tasks/cancel"):
                status, body = await post(http, second, method, {"taskId": task_id},
                                          capabilities={"extensions": {TASKS: {}}})
                assert "result" not in body and (status >= 400 or body["error"]["code"] == types.INVALID_PARAMS)


async def test_a_result_link_of_another_replica_without_a_shared_store_is_unknown(replicas: tuple[str, str]) -> None:
    """Attacks 'A read by ... anyone else is told no stored result ... (unknown, or expired)' across replicas."""
    first, second = replicas
    async with client(first) as c:
        link = (await c.call_tool("data__big", {"size": 2_500})).content[-1]
    assert isinstance(link, types.ResourceLink)
    async with client(second) as c:
        with pytest.raises(MCPError) as refused:
            await c.read_resource(f"{link.uri}?page=2")
    assert refused.value.code == types.INVALID_PARAMS and "unknown, or expired" in refused.value.message
