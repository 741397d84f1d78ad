"""What toolbridge tells a session about the protocol it carries: the extensions of the servers in its
scope, and the cache hints (`ttlMs`, `cacheScope`) of its merged lists."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client
from servers import cached_lists
from servers.apps_server import build as app_server

from proxy.app import run_gateway
from proxy.config import Config, ProfileConfig, ToolsetsConfig, UpstreamConfig
from proxy.downstream import ChangeNotifier, Handlers, build_server

pytestmark = pytest.mark.anyio

UI = "io.modelcontextprotocol/ui"
CACHED_LISTS = str(Path(cached_lists.__file__))


def _hints(*results: Any) -> list[tuple[int, str]]:
    return [(result.ttl_ms, result.cache_scope) for result in results]


async def _lists(client: Client) -> list[tuple[int, str]]:
    return _hints(await client.list_tools(), await client.list_resources(), await client.list_prompts())


async def test_a_merged_list_carries_the_smallest_ttl_and_stays_public_when_every_server_is() -> None:
    servers = {"a": cached_lists.build("a", 60_000, "public"), "b": cached_lists.build("b", 30_000, "public")}
    async with gateway([], servers=servers, mode="auto") as harness, Client(harness.server, cache=None) as client:
        assert await _lists(client) == [(30_000, "public")] * 3


async def test_one_private_server_makes_the_merged_lists_private() -> None:
    servers = {"a": cached_lists.build("a", 60_000, "public"), "b": cached_lists.build("b", 90_000, "private")}
    async with gateway([], servers=servers, mode="auto") as harness, Client(harness.server, cache=None) as client:
        assert await _lists(client) == [(60_000, "private")] * 3


async def test_a_server_whose_lists_carry_no_hint_makes_the_tools_list_uncacheable() -> None:
    servers = {"a": cached_lists.build("a", 60_000, "public")}
    legacy = Upstream("old", [tool("echo", "Echo.")])  # a handshake-era upstream: no hint on the wire
    async with gateway([legacy], servers=servers, mode="auto") as harness, Client(harness.server, cache=None) as client:
        tools, resources = await client.list_tools(), await client.list_resources()
    assert _hints(tools, resources) == [(0, "private"), (60_000, "public")]  # `old` lists tools only


async def test_tools_promoted_per_session_make_the_tools_list_private() -> None:
    promoting = ToolsetsConfig(profiles={"default": ProfileConfig(toolsets=("all",), promote=2)})
    servers = {"a": cached_lists.build("a", 60_000, "public")}
    async with gateway([], promoting, servers=servers, mode="auto") as harness, \
            Client(harness.server, cache=None) as client:
        tools, resources = await client.list_tools(), await client.list_resources()
    assert _hints(tools, resources) == [(60_000, "private"), (60_000, "public")]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_apps_extension_is_advertised_when_a_server_in_scope_has_apps(mode: str) -> None:
    only_plain = ToolsetsConfig(profiles={"default": ProfileConfig(toolsets=("all",)),
                                          "plain": ProfileConfig(toolsets=("mcp-plain",))})
    async with gateway([Upstream("plain", [tool("echo")])], only_plain, servers={"timer": app_server()},
                       mode=mode) as harness, Client(harness.server, mode=mode) as client:
        advertised = client.server_capabilities.extensions
    async with gateway([Upstream("plain", [tool("echo")])], only_plain, servers={"timer": app_server()},
                       mode=mode, profile="plain") as harness, Client(harness.server, mode=mode) as client:
        out_of_scope = client.server_capabilities.extensions
    assert advertised == {UI: {}} and not out_of_scope


async def test_only_carried_extensions_are_advertised_with_their_settings_merged() -> None:
    servers = {"a": cached_lists.build("a", 0, "private", (UI, "com.example/unknown")),
               "b": cached_lists.build("b", 0, "private", (UI,))}
    servers["a"].extensions[UI] = {"mimeTypes": ["text/html;profile=mcp-app"]}
    servers["b"].extensions[UI] = {"mimeTypes": ["text/html;profile=mcp-app", "text/x-other"]}
    async with gateway([], servers=servers, mode="auto") as harness, Client(harness.server) as client:
        advertised = client.server_capabilities.extensions
    assert advertised == {UI: {"mimeTypes": ["text/html;profile=mcp-app", "text/x-other"]}}


async def test_the_fleet_records_each_stdio_upstreams_hints_and_extensions(tmp_path: Path) -> None:
    def upstream(name: str, ttl: int, *ids: str) -> UpstreamConfig:
        return UpstreamConfig(name=name, command=sys.executable, args=(CACHED_LISTS, name, str(ttl), "public", *ids))

    config = Config(directory=tmp_path, upstreams={"a": upstream("a", 45_000, UI), "b": upstream("b", 15_000)})
    async with run_gateway(config) as gateway_, anyio.create_task_group() as tg:
        with anyio.fail_after(30):
            await gateway_.fleet.ready.wait()
        notifier = ChangeNotifier(gateway_.views)
        await tg.start(notifier.run)
        handlers = Handlers(gateway_.views, gateway_.fleet, notifier, fleet_ready=gateway_.fleet.ready,
                            startup_wait=5)
        async with Client(build_server(handlers), cache=None) as client:
            extensions = client.server_capabilities.extensions
            hints = await _lists(client)
        tg.cancel_scope.cancel()
    assert extensions == {UI: {}} and hints == [(15_000, "public")] * 3
