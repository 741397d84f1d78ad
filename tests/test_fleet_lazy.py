"""Cached catalogs, lazy upstreams, idle stop and bounded spawning, over real stdio upstreams."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import types
from servers.harness import descendants, running_fleet, stdio_config, tiny_config, wait_for

from proxy.errors import UpstreamUnavailable
from proxy.upstream import DiskCatalogCache, UpstreamState

pytestmark = pytest.mark.anyio


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def fill_cache(tmp_path: Path, config: object, cache: DiskCatalogCache) -> None:
    """Run the server once so its catalog lands in `cache`."""
    async with running_fleet([config], tmp_path, cache=cache) as (fleet, _):  # type: ignore[list-item]
        with anyio.fail_after(30):
            await fleet.ready.wait()


async def test_a_lazy_server_is_listed_from_the_cache_and_started_by_its_first_call(tmp_path: Path) -> None:
    cache = DiskCatalogCache(tmp_path / "catalogs")
    config = stdio_config("a")
    await fill_cache(tmp_path, config, cache)
    assert len(list(cache.directory.glob("a.*.json"))) == 1
    async with running_fleet([config], tmp_path, cache=cache, lazy=True) as (fleet, registry):
        assert fleet.ready.is_set()  # settled from the cache, before any child
        assert "a__echo" in registry.tools
        assert fleet.status()[0].state is UpstreamState.LAZY and fleet.is_offered("a")
        assert descendants() == set()
        with anyio.fail_after(30):
            result = await fleet.call_tool("a", "echo", {"text": "hi"})
        assert text(result) == "hi"
        assert fleet.status()[0].state is UpstreamState.READY
        assert len(descendants()) == 2  # the server and its watchdog (proxy/upstream/connection/_watchdog.py)


async def test_a_lazy_server_without_a_cache_starts_once_to_fill_it_then_stops(tmp_path: Path) -> None:
    cache = DiskCatalogCache(tmp_path / "catalogs")
    async with running_fleet([stdio_config("a")], tmp_path, cache=cache, lazy=True) as (fleet, registry):
        with anyio.fail_after(30):
            await fleet.wait_state("a", UpstreamState.STOPPED)
            await wait_for(lambda: not descendants())
        assert "a__echo" in registry.tools and fleet.is_offered("a")
        assert cache.load(stdio_config("a")) is not None


async def test_an_idle_server_stops_keeps_its_tools_and_restarts_on_the_next_call(tmp_path: Path) -> None:
    config = stdio_config("a", idle_timeout=0.5)
    async with running_fleet([config], tmp_path) as (fleet, registry):
        with anyio.fail_after(30):
            await fleet.ready.wait()
            first = int(text(await fleet.call_tool("a", "pid", {})))
            await fleet.wait_state("a", UpstreamState.STOPPED)
            await wait_for(lambda: not descendants())
        generation = registry.generation
        assert "a__echo" in registry.tools
        with anyio.fail_after(30):
            second = int(text(await fleet.call_tool("a", "pid", {})))
        assert second != first
        assert registry.generation == generation  # same catalog: nothing to announce


async def test_the_live_list_replaces_a_stale_cache(tmp_path: Path) -> None:
    cache = DiskCatalogCache(tmp_path / "catalogs")
    config = stdio_config("a")
    await fill_cache(tmp_path, config, cache)
    path = next(cache.directory.glob("a.*.json"))
    document = json.loads(path.read_text())
    document["tools"].append({"name": "vanished", "inputSchema": {"type": "object"}})
    path.write_text(json.dumps(document))
    async with running_fleet([config], tmp_path, cache=cache) as (_, registry):
        assert "a__vanished" in registry.tools  # listed from the cache while it connects
        with anyio.fail_after(30):
            await wait_for(lambda: "a__vanished" not in registry.tools, registry)
        assert "a__echo" in registry.tools
    assert "vanished" not in path.read_text()


async def test_a_cache_for_another_config_or_a_corrupt_one_is_a_miss(tmp_path: Path) -> None:
    cache = DiskCatalogCache(tmp_path / "catalogs")
    cache.store(stdio_config("a"), [types.Tool(name="t", input_schema={"type": "object"})])
    assert cache.load(stdio_config("a", "--extra-tools", "1")) is None
    assert cache.load(stdio_config("a", timeout=5)) is not None  # timeouts do not change the catalog
    next(cache.directory.glob("a.*.json")).write_text("{not json")
    assert cache.load(stdio_config("a")) is None


async def test_a_stored_catalog_is_one_json_document_that_loads_back(tmp_path: Path) -> None:
    cache = DiskCatalogCache(tmp_path / "catalogs")
    tools = [types.Tool(name="grüße", description="Sagt „hallo“.", input_schema={"type": "object"}),
             types.Tool(name="t", input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
                        annotations=types.ToolAnnotations(read_only_hint=True))]
    for listed in (tools, []):
        cache.store(stdio_config("a"), listed)
        document = json.loads(next(cache.directory.glob("a.*.json")).read_text(encoding="utf-8"))
        assert document == {"format": 1, "server": "a",
                            "tools": [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed]}
        assert cache.load(stdio_config("a")) == listed


async def test_a_call_to_a_hanging_server_waits_for_its_connect_timeout_only(tmp_path: Path) -> None:
    cache = DiskCatalogCache(tmp_path / "catalogs")
    cache.store(stdio_config("hang", "--hang", connect_timeout=1),
                [types.Tool(name="echo", input_schema={"type": "object"})])
    upstreams = [stdio_config("hang", "--hang", connect_timeout=1), stdio_config("good")]
    async with running_fleet(upstreams, tmp_path, cache=cache) as (fleet, _):
        with anyio.fail_after(30):
            assert text(await fleet.call_tool("good", "echo", {"text": "ok"})) == "ok"
        with anyio.fail_after(30), pytest.raises(UpstreamUnavailable):
            await fleet.call_tool("hang", "echo", {})
        assert fleet.status()[1].state is not UpstreamState.READY


async def test_spawning_is_bounded(tmp_path: Path) -> None:
    silent = tiny_config("silent", "--hang", connect_timeout=2)
    upstreams = [silent, *(tiny_config(f"s{i}") for i in range(6))]
    async with running_fleet(upstreams, tmp_path, spawn_concurrency=1) as (fleet, _):
        with anyio.fail_after(30):
            await wait_for(lambda: fleet.is_ready("s0"))
        # Unbounded, s0 is up in a fraction of a second; with one slot it waited for silent's timeout.
        assert "connect_timeout" in (next(s for s in fleet.status() if s.name == "silent").last_error or "")
