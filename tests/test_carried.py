"""What toolbridge tells a session about the protocol it carries: the extensions of the servers in its
scope, and the cache hints (`ttlMs`, `cacheScope`) of its merged lists."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port, serve_app
from inprocess import Upstream, gateway, tool
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from servers import cached_lists
from servers.apps_server import build as app_server
from servers.jwt_issuer import Issuer, issuer_app

from proxy.app import Gateway, run_gateway
from proxy.config import Config, ProfileConfig, ToolsetsConfig, UpstreamConfig
from proxy.downstream import ChangeNotifier, Handlers, HttpApp, ProtectedResource, build_server, transport_security

pytestmark = pytest.mark.anyio

UI = "io.modelcontextprotocol/ui"
TASKS = "io.modelcontextprotocol/tasks"


def carried(extensions: dict[str, Any] | None) -> dict[str, Any]:
    """The extensions advertised for the servers in scope: tasks are toolbridge's own (2026 era), always there."""
    return {k: v for k, v in (extensions or {}).items() if k != TASKS}
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
    assert carried(advertised) == {UI: {}} and not carried(out_of_scope)


async def test_only_carried_extensions_are_advertised_with_their_settings_merged() -> None:
    servers = {"a": cached_lists.build("a", 0, "private", (UI, "com.example/unknown")),
               "b": cached_lists.build("b", 0, "private", (UI,))}
    servers["a"].extensions[UI] = {"mimeTypes": ["text/html;profile=mcp-app"]}
    servers["b"].extensions[UI] = {"mimeTypes": ["text/html;profile=mcp-app", "text/x-other"]}
    async with gateway([], servers=servers, mode="auto") as harness, Client(harness.server) as client:
        advertised = client.server_capabilities.extensions
    assert carried(advertised) == {UI: {"mimeTypes": ["text/html;profile=mcp-app", "text/x-other"]}}


def _upstream(name: str, ttl: int, *ids: str) -> UpstreamConfig:
    """`cached_lists` as a stdio upstream whose lists are public for `ttl` ms."""
    return UpstreamConfig(name=name, command=sys.executable, args=(CACHED_LISTS, name, str(ttl), "public", *ids))


@asynccontextmanager
async def _handlers(config: Config) -> AsyncIterator[tuple[Gateway, Handlers]]:
    """The gateway with its fleet connected, and the downstream handlers, as `serve` wires them."""
    async with run_gateway(config) as gateway_, anyio.create_task_group() as tg:
        with anyio.fail_after(30):
            await gateway_.fleet.ready.wait()
        notifier = ChangeNotifier(gateway_.views)
        await tg.start(notifier.run)
        handlers = Handlers(gateway_.views, gateway_.fleet, notifier, fleet_ready=gateway_.fleet.ready,
                            startup_wait=5)
        await tg.start(handlers.run)
        yield gateway_, handlers
        tg.cancel_scope.cancel()


async def test_the_fleet_records_each_stdio_upstreams_hints_and_extensions(tmp_path: Path) -> None:
    config = Config(directory=tmp_path, upstreams={"a": _upstream("a", 45_000, UI), "b": _upstream("b", 15_000)})
    async with _handlers(config) as (_, handlers), Client(build_server(handlers), cache=None) as client:
        extensions = client.server_capabilities.extensions
        hints = await _lists(client)
    assert carried(extensions) == {UI: {}} and hints == [(15_000, "public")] * 3


@pytest.mark.parametrize(("by_claim", "scope"), [(True, "private"), (False, "public")])
async def test_lists_whose_profile_follows_a_token_claim_are_private(
    tmp_path: Path, by_claim: bool, scope: str
) -> None:
    issuer_port, port = free_port(), free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}", audience=f"http://127.0.0.1:{port}/mcp")
    claim = {"profile_claim": "groups", "profiles": {"admins": "default"}} if by_claim else {}
    settings = ToolsetsConfig.model_validate({"auth": {
        "issuer": issuer.base, "audience": issuer.audience, "jwks_url": f"{issuer.base}/jwks.json", **claim}})
    config = Config(directory=tmp_path, upstreams={"a": _upstream("a", 45_000)}, toolsets=settings)
    assert settings.auth is not None
    async with serve_app(issuer_app(issuer), issuer_port), _handlers(config) as (gateway_, handlers):
        app = HttpApp(build_server(handlers), security=transport_security("127.0.0.1"), auth_token=None,
                      has_profile=gateway_.views.has_profile, health=gateway_.health,
                      resource=ProtectedResource(settings.auth, tmp_path))
        async with serve_app(app, port) as base, \
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {issuer.token(groups=['admins'])}"}) as http, \
                Client(streamable_http_client(f"{base}/mcp", http_client=http), cache=None) as client:
            assert client.protocol_version == "2026-07-28"
            tools, resources = await client.list_tools(), await client.list_resources()
    assert _hints(tools, resources) == [(45_000, scope)] * 2


async def test_toolbridge_declares_mcp_apps_to_its_upstreams(tmp_path: Path) -> None:
    """A server that offers its UI only to hosts that render it (`client_supports_apps`) offers it."""
    app = UpstreamConfig(name="clock", command=sys.executable, args=(str(Path(app_server.__code__.co_filename)),))
    async with _handlers(Config(directory=tmp_path, upstreams={"clock": app})) as (_, handlers), \
            Client(build_server(handlers)) as client:
        answer = await client.call_tool("tool_call", {"name": "clock__host_renders_apps", "arguments": {}})
    assert answer.content == [types.TextContent(type="text", text="yes")]
