"""Cold start with no cached catalog: a one-shot client gets the answer a patient one gets.

A one-shot client (an agent run, a CLI, a client that ignores list_changed) asks once, right after
`initialize`, while a slow upstream is still starting; a patient one asks again once it has started.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client, types
from servers.harness import stdio_config
from servers.slow_start import URI

from proxy.app import Gateway, run_gateway
from proxy.config import Config, ToolsetsConfig, UpstreamConfig
from proxy.downstream import ChangeNotifier, Handlers, build_server

pytestmark = pytest.mark.anyio

SLOW_START = str(Path(__file__).parent / "servers" / "slow_start.py")
DELAY = 5.0  # past the old fixed 3 s window


@asynccontextmanager
async def cold_gateway(tmp_path: Path) -> AsyncIterator[tuple[Gateway, Handlers]]:
    """A fast upstream and a slow one, the defaults of toolsets.yaml, and no catalog cached from a run before."""
    slow = UpstreamConfig(name="slow", command=sys.executable, args=(SLOW_START, "--delay", str(DELAY)))
    settings = ToolsetsConfig(core=("slow__ping", "good__echo"))
    config = Config(tmp_path, {"good": stdio_config("good"), "slow": slow}, settings)
    async with run_gateway(config) as gateway, anyio.create_task_group() as tg:
        notifier = ChangeNotifier(gateway.views)
        await tg.start(notifier.run)
        handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready,
                            startup_wait=settings.startup_wait)
        await tg.start(handlers.run)
        yield gateway, handlers
        tg.cancel_scope.cancel()


async def patiently(gateway: Gateway) -> None:
    with anyio.fail_after(60):
        await gateway.fleet.ready.wait()


async def test_a_one_shot_tools_list_equals_the_patient_one(tmp_path: Path) -> None:
    async with cold_gateway(tmp_path) as (gateway, handlers):
        async with Client(build_server(handlers)) as client:
            with anyio.fail_after(60):
                one_shot = await client.list_tools()
        await patiently(gateway)
        async with Client(build_server(handlers)) as client:
            patient = await client.list_tools()
    assert "slow__ping" in {tool.name for tool in one_shot.tools}
    assert one_shot.tools == patient.tools


@pytest.mark.parametrize(("name", "arguments"), [("slow__ping", {}), ("tool_call", {"name": "slow__later"})])
async def test_a_one_shot_call_to_a_starting_server_succeeds(tmp_path: Path, name: str, arguments: dict) -> None:
    """A core tool called directly, a deferred one through tool_call; neither listed first."""
    async with cold_gateway(tmp_path) as (_, handlers), Client(build_server(handlers), cache=None) as client:
        with anyio.fail_after(60):
            result = await client.call_tool(name, arguments)
    assert not result.is_error
    assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "pong"


async def test_one_shot_resources_list_and_read_equal_the_patient_ones(tmp_path: Path) -> None:
    async with cold_gateway(tmp_path) as (gateway, handlers):
        async with Client(build_server(handlers)) as client:
            with anyio.fail_after(60):
                read = await client.read_resource(URI)
        async with Client(build_server(handlers)) as client:
            with anyio.fail_after(60):
                listed = await client.list_resources()
        await patiently(gateway)
        async with Client(build_server(handlers)) as client:
            patient = await client.list_resources()
    assert [resource.uri for resource in listed.resources] == [URI]
    assert listed.resources == patient.resources
    assert isinstance(read.contents[0], types.TextResourceContents) and read.contents[0].text == "slow but here"
