"""The startup wait is one window at the start, never a wait on every request (a hanging upstream)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client, types
from servers.harness import stdio_config, wait_for

from proxy.app import Gateway, run_gateway
from proxy.config import Config, ToolsetsConfig
from proxy.downstream import ChangeNotifier, Handlers, build_server

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def serving(tmp_path: Path, startup_wait: float) -> AsyncIterator[tuple[Gateway, Client]]:
    """A good upstream and one that never answers `initialize`, behind the real downstream server."""
    upstreams = [stdio_config("good"), stdio_config("hang", "--hang", connect_timeout=600)]
    config = Config(tmp_path, {u.name: u for u in upstreams}, ToolsetsConfig(core=("*",), startup_wait=startup_wait))
    async with run_gateway(config) as gateway, anyio.create_task_group() as tg:
        notifier = ChangeNotifier(gateway.views)
        await tg.start(notifier.run)
        handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready,
                            startup_wait=startup_wait)
        await tg.start(handlers.run)
        async with Client(build_server(handlers), cache=None) as client:  # no tools/list before a call
            yield gateway, client
        tg.cancel_scope.cancel()


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_only_the_startup_window_waits_then_tools_list_answers_at_once(tmp_path: Path) -> None:
    async with serving(tmp_path, startup_wait=2) as (gateway, client):
        with anyio.fail_after(30):
            await wait_for(lambda: "good__echo" in gateway.registry.tools, gateway.registry)
            first = await client.list_tools()
        assert "good__echo" in {tool.name for tool in first.tools}
        assert not gateway.fleet.ready.is_set()
        # Before, each of these 40 requests waited out startup_wait (2 s) again: 80 s in all.
        with anyio.fail_after(30):
            for _ in range(20):
                await client.list_tools()
                await client.call_tool("good__echo", {"text": "again"})
