"""Client-aware surfaces end to end (issue 11): `_meta` for clients that defer tools, direct exposure,
and promotion, through `toolbridge serve` over stdio and HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import free_port, needs
from fleetdir import serve_http, serve_stdio, write_fleet
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from servers.cluster import redis_server

pytestmark = pytest.mark.anyio

TOOLSETS = {
    "core": ["alpha__alpha_0000"],
    "startup_wait": 20,
    "profiles": {
        "default": {"promote": 2},
        "direct": {"match": "direct-*", "exposure": "direct"},
    },
}
IN_SCOPE = {f"alpha__alpha_{i:04}" for i in range(3)} | {f"beta__beta_{i:04}" for i in range(4)}


def fleet(directory: Path) -> Path:
    servers = {"alpha": ["--tools", "3", "--prefix", "alpha"], "beta": ["--tools", "4", "--prefix", "beta"]}
    return write_fleet(directory, servers, TOOLSETS)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return fleet(tmp_path / "config")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """One HTTP `toolbridge serve` for the tests that change nothing in it (no pin, no promotion)."""
    async with serve_http(fleet(tmp_path_factory.mktemp("shared") / "config"), free_port()) as base:
        yield base


@asynccontextmanager
async def connect(config: Path, transport: str, mode: str, client: str, on_message: Any = None,
                  base: str | None = None) -> AsyncIterator[Client]:
    """A session of `toolbridge serve` on `config`: a process of its own over stdio; over HTTP, the one
    serving at `base` when given, else one of its own."""
    info = types.Implementation(name=client, version="1")
    if transport == "stdio":
        async with Client(serve_stdio(config), mode=mode, client_info=info, message_handler=on_message) as session:
            yield session
        return
    async with AsyncExitStack() as stack:
        if base is None:
            base = await stack.enter_async_context(serve_http(config, free_port()))
        yield await stack.enter_async_context(Client(streamable_http_client(f"{base}/mcp"), mode=mode,
                                                     client_info=info, message_handler=on_message))


CASES = [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")]


@pytest.mark.parametrize(("transport", "mode"), CASES)
async def test_bridge_and_core_tools_are_always_loaded(
    config: Path, shared: str, transport: str, mode: str
) -> None:
    async with connect(config, transport, mode, "ide", base=shared) as client:
        tools = {t.name: t.meta for t in (await client.list_tools()).tools}
    assert list(tools) == ["alpha__alpha_0000", "tool_search", "tool_describe", "tool_call"]
    assert all(meta and meta["anthropic/alwaysLoad"] is True for meta in tools.values())
    assert tools["tool_call"]["anthropic/maxResultSizeChars"] == tools["alpha__alpha_0000"][
        "anthropic/maxResultSizeChars"] == 100_000


@pytest.mark.parametrize(("transport", "mode"), CASES)
async def test_direct_exposure_is_the_scoped_registry(config: Path, shared: str, transport: str, mode: str) -> None:
    async with connect(config, transport, mode, "direct-agent", base=shared) as client:
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == IN_SCOPE and all(t.meta is None for t in tools)
        called = await client.call_tool("beta__beta_0002", {"value": "5"})  # coerced and checked as tool_call is
        assert not called.is_error and json.loads(called.content[0].text)["arguments"] == {"value": 5}


@pytest.mark.parametrize(("transport", "mode"), CASES)
async def test_a_used_tool_is_promoted_and_the_session_told(config: Path, transport: str, mode: str) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect(config, transport, mode, "ide", on_message) as client, anyio.create_task_group() as tg:
        assert "beta__beta_0001" not in [t.name for t in (await client.list_tools()).tools]
        if mode != "legacy":
            listening = anyio.Event()

            async def listen() -> None:
                async with client.listen(tools_list_changed=True) as stream:
                    listening.set()
                    async for _ in stream:
                        changed.set()

            tg.start_soon(listen)
            with anyio.fail_after(10):
                await listening.wait()
        called = await client.call_tool("tool_call", {"name": "beta__beta_0001", "arguments": {"value": 1}})
        assert not called.is_error
        if mode != "legacy":  # a 2026-era list changes only on an explicit pin (SEP-2567)
            await client.call_tool("tool_describe", {"names": ["beta__beta_0001"], "pin": True})
        with anyio.fail_after(10):
            await changed.wait()
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["beta__beta_0001"].input_schema["required"] == ["value"]
        assert not (await client.call_tool("beta__beta_0001", {"value": 2})).is_error
        tg.cancel_scope.cancel()


async def pin(client: Client, name: str) -> None:
    assert not (await client.call_tool("tool_describe", {"names": [name], "pin": True})).is_error


async def test_without_per_user_tokens_sessionless_pins_are_the_anonymous_principals(config: Path) -> None:
    """A 2026-era HTTP request has no session, and without per-user tokens every such request is the one anonymous
    principal: what one pinned, a new connection finds promoted whatever name it gives (a name never picks an
    owner); a handshake-era session keeps its own promotions."""
    async with serve_http(config, free_port()) as base:

        async def listed(name: str, mode: str = "auto") -> set[str]:
            info = types.Implementation(name=name, version="1")
            async with Client(streamable_http_client(f"{base}/mcp"), client_info=info, mode=mode) as client:
                return {t.name for t in (await client.list_tools()).tools}

        info = types.Implementation(name="ide", version="1")
        async with Client(streamable_http_client(f"{base}/mcp"), client_info=info) as client:
            assert client.protocol_version == "2026-07-28"
            await pin(client, "beta__beta_0001")
        assert "beta__beta_0001" in await listed("ide")
        assert "beta__beta_0001" in await listed("other-ide")
        assert "beta__beta_0001" not in await listed("ide", mode="legacy")


@needs("redis-server")
async def test_replicas_sharing_redis_list_and_answer_a_sessionless_clients_pins(
        config: Path, tmp_path: Path) -> None:
    """Any replica may answer a 2026-era request: what was pinned through one replica, another lists and calls."""
    info = types.Implementation(name="ide", version="1")
    async with redis_server(tmp_path / "redis") as url, \
            serve_http(config, free_port(), "--redis-url", url) as first, \
            serve_http(config, free_port(), "--redis-url", url) as second:
        async with Client(streamable_http_client(f"{first}/mcp"), client_info=info) as client:
            await pin(client, "beta__beta_0001")
        async with Client(streamable_http_client(f"{second}/mcp"), client_info=info) as client:
            assert client.protocol_version == "2026-07-28"
            assert not (await client.call_tool("beta__beta_0001", {"value": 2})).is_error  # before any list here
            assert "beta__beta_0001" in {t.name for t in (await client.list_tools()).tools}
            await pin(client, "beta__beta_0002")
        # The first replica still holds [0001] alone; its next pin adds to the shared record, not over it.
        async with Client(streamable_http_client(f"{first}/mcp"), client_info=info) as client:
            await pin(client, "beta__beta_0003")
        async with Client(streamable_http_client(f"{second}/mcp"), client_info=info) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
        assert {"beta__beta_0002", "beta__beta_0003"} <= listed  # promote: 2, the two pinned last
        assert "beta__beta_0001" not in listed
