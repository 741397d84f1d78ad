"""Start-up: a one-shot client gets the answer a patient one gets — from the cached catalog, never by waiting.

A one-shot client (an agent run, a CLI, a client that ignores list_changed) asks once, right after
`initialize`, while a slow upstream is still starting; a patient one asks again once it has started.
On a first run (nothing cached) the first answer waits at most `startup_wait` (3 s by default); from
the next run on, a server is listed from its cached catalog at once and a call or read of it waits
for that server alone.
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

SERVERS = Path(__file__).parent / "servers"
DELAY = 5.0  # past the 3 s startup window
BOUND = 4.5  # the window, with slack for a loaded machine
UI = "ui://clock/clock/app.html"  # the server `clock`'s `ui://clock/app.html`
# A server that starts "within the window" takes 0.5 s plus Python's start-up, several seconds on a loaded machine:
# the tests about it widen the window rather than race it.
WIDE = 10.0


def slow_start(delay: float = DELAY) -> UpstreamConfig:
    return UpstreamConfig(name="slow", command=sys.executable, args=(str(SERVERS / "slow_start.py"), "--delay",
                                                                     str(delay)))


def slow_app(delay: float) -> UpstreamConfig:
    """An MCP App upstream (a tool with a `ui://` resource) that takes `delay` seconds to start."""
    return UpstreamConfig(name="clock", command=sys.executable, args=(str(SERVERS / "apps_server.py"), "--delay",
                                                                      str(delay)))


@asynccontextmanager
async def serving(tmp_path: Path, slow: UpstreamConfig, window: float | None = None
                  ) -> AsyncIterator[tuple[Gateway, Handlers]]:
    """A fast upstream and `slow`, with the defaults of toolsets.yaml (or a startup window of `window` s); the
    catalog cache is `tmp_path/.cache`."""
    settings = ToolsetsConfig(core=("slow__ping", "good__echo", "clock__*"),
                              **({"startup_wait": window} if window is not None else {}))
    config = Config(tmp_path, {"good": stdio_config("good"), slow.name: slow}, settings)
    async with run_gateway(config) as gateway, anyio.create_task_group() as tg:
        notifier = ChangeNotifier(gateway.views)
        await tg.start(notifier.run)
        handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready,
                            fleet_started=gateway.fleet.started, startup_wait=settings.startup_wait)
        await tg.start(handlers.run)
        yield gateway, handlers
        tg.cancel_scope.cancel()


async def patiently(gateway: Gateway) -> None:
    with anyio.fail_after(60):
        await gateway.fleet.started.wait()


async def warm(tmp_path: Path, slow: UpstreamConfig) -> None:
    """A run before, which listed every server and so left their catalogs cached."""
    async with serving(tmp_path, slow) as (gateway, _):
        await patiently(gateway)


async def timed_list(handlers: Handlers) -> tuple[types.ListToolsResult, float]:
    async with Client(build_server(handlers)) as client:
        started = anyio.current_time()
        with anyio.fail_after(60):
            listed = await client.list_tools()
        return listed, anyio.current_time() - started


async def test_a_first_run_lists_within_the_window_and_the_next_one_lists_everything_at_once(tmp_path: Path) -> None:
    async with serving(tmp_path, slow_start()) as (gateway, handlers):
        first, cold = await timed_list(handlers)
        await patiently(gateway)
        async with Client(build_server(handlers)) as client:
            patient = await client.list_tools()
    async with serving(tmp_path, slow_start()) as (gateway, handlers):
        one_shot, elapsed = await timed_list(handlers)
        assert not gateway.fleet.is_ready("slow")  # listed from the cache, not from the connection
    assert cold < BOUND and "slow__ping" not in {tool.name for tool in first.tools}
    assert elapsed < BOUND
    assert "slow__ping" in {tool.name for tool in one_shot.tools}
    assert one_shot.tools == patient.tools


@pytest.mark.parametrize(("name", "arguments"), [("slow__ping", {}), ("tool_call", {"name": "slow__later"})])
async def test_a_one_shot_call_to_a_starting_cached_server_succeeds(tmp_path: Path, name: str, arguments: dict) -> None:
    """A core tool called directly, a deferred one through tool_call; neither listed first."""
    await warm(tmp_path, slow_start())
    async with serving(tmp_path, slow_start()) as (_, handlers), Client(build_server(handlers), cache=None) as client:
        with anyio.fail_after(60):
            result = await client.call_tool(name, arguments)
    assert not result.is_error
    assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "pong"


async def test_one_shot_resources_of_a_cached_server_starting_within_the_window_equal_the_patient_ones(
    tmp_path: Path,
) -> None:
    """Resources are not cached: their first list and read wait for the connection, within the window."""
    await warm(tmp_path, slow_start(0.5))
    async with serving(tmp_path, slow_start(0.5), WIDE) as (gateway, handlers):
        async with Client(build_server(handlers)) as client:
            with anyio.fail_after(WIDE + 1.5):
                listed = await client.list_resources()
                read = await client.read_resource(URI)
        await patiently(gateway)
        async with Client(build_server(handlers)) as client:
            patient = await client.list_resources()
    assert [resource.uri for resource in listed.resources] == [URI]
    assert listed.resources == patient.resources
    assert isinstance(read.contents[0], types.TextResourceContents) and read.contents[0].text == "slow but here"


async def test_a_cached_apps_ui_resource_is_listed_while_its_server_starts(tmp_path: Path) -> None:
    """MCP Apps warm start: the UI tool is listed at once from the cache; its `ui://` resource is not cached, so
    the first resources/list waits for the server (within the window) instead of answering empty."""
    await warm(tmp_path, slow_app(0.5))
    async with serving(tmp_path, slow_app(0.5), WIDE) as (gateway, handlers), \
            Client(build_server(handlers)) as client:
        with anyio.fail_after(WIDE + 1.5):
            tools = await client.list_tools()
            assert not gateway.fleet.is_ready("clock")  # listed from the cache
            listed = await client.list_resources()
    assert "clock__show_clock" in {tool.name for tool in tools.tools}
    assert UI in {resource.uri for resource in listed.resources}


async def test_a_read_of_a_cached_apps_ui_resource_waits_for_its_server_as_a_call_does(tmp_path: Path) -> None:
    await warm(tmp_path, slow_app(DELAY))
    async with serving(tmp_path, slow_app(DELAY)) as (_, handlers), Client(build_server(handlers)) as client:
        with anyio.fail_after(60):
            read = await client.read_resource(UI)
    assert isinstance(read.contents[0], types.TextResourceContents) and "clock" in read.contents[0].text
