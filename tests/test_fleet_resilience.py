"""The fleet under stress: busy upstreams stay alive, restarts are waited for, noise is one line."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import serve_app
from mcp import types
from servers.controllable import http_app, sse_app
from servers.harness import running_fleet, stdio_config, tiny_config

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamUnavailable
from proxy.upstream import UpstreamState

pytestmark = pytest.mark.anyio


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_busy_upstream_outlives_the_keepalive(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Blocked in a call for longer than keepalive interval + timeout, it is still alive."""
    caplog.set_level(logging.INFO)
    async with running_fleet([stdio_config("a")], tmp_path, keepalive=0.2, keepalive_timeout=0.3) as (fleet, _):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        connection = fleet.status()[0]
        with anyio.fail_after(20):
            result = await fleet.call_tool("a", "block", {"seconds": 2})
        assert text(result) == "blocked"
        assert fleet.status() == [connection]  # same state, never reconnected
    assert "keepalive" not in caplog.text
    assert "TimeoutError: \n" not in caplog.text and not caplog.text.rstrip().endswith("TimeoutError:")


@pytest.mark.parametrize(("app", "path"), [(http_app, "/mcp"), (sse_app, "/sse")])
async def test_a_two_megabyte_result_arrives_over_http_and_sse(tmp_path: Path, app: Any, path: str) -> None:
    async with serve_app(app()) as base:
        config = UpstreamConfig(name="web", url=base + path, transport="sse" if path == "/sse" else None)
        async with running_fleet([config], tmp_path, mode="legacy") as (fleet, _):  # answers are SSE events
            with anyio.fail_after(10):
                await fleet.ready.wait()
            with anyio.fail_after(20):
                result = await fleet.call_tool("web", "big", {"size": 2_000_000})
    assert len(text(result)) == 2_000_000


async def test_a_result_over_the_limit_fails_that_call_alone(tmp_path: Path) -> None:
    async with serve_app(http_app()) as base:
        config = UpstreamConfig(name="web", url=base + "/mcp", max_message_bytes=100_000)
        async with running_fleet([config], tmp_path, mode="legacy") as (fleet, _):  # answers are SSE events
            with anyio.fail_after(10):
                await fleet.ready.wait()
            before = fleet.status()
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(fleet.call_tool, "web", "sleep", {"seconds": 0.5})
                    with pytest.raises(UpstreamUnavailable, match=r"tool 'big'.*100000 byte limit"):
                        await fleet.call_tool("web", "big", {"size": 200_000})
                assert text(await fleet.call_tool("web", "big", {"size": 1000})) == "x" * 1000
            assert fleet.status() == before  # never reconnected


async def test_a_call_during_a_restart_waits_for_the_server(tmp_path: Path) -> None:
    async with running_fleet([stdio_config("a", restart_wait=20), stdio_config("b", restart_wait=0.1)],
                             tmp_path) as (fleet, _):
        with anyio.fail_after(20):
            await fleet.ready.wait()
        for name in ("a", "b"):
            os.kill(int(text(await fleet.call_tool(name, "pid", {}))), signal.SIGKILL)
        with anyio.fail_after(10):
            await fleet.wait_state("a", UpstreamState.BACKOFF)
            await fleet.wait_state("b", UpstreamState.BACKOFF)
        with pytest.raises(UpstreamUnavailable, match="temporarily unavailable"):
            await fleet.call_tool("b", "echo", {"text": "hi"})  # its wait is shorter than a restart
        with anyio.fail_after(30):
            assert text(await fleet.call_tool("a", "echo", {"text": "hi"})) == "hi"


async def test_a_parked_server_fails_a_call_at_once(tmp_path: Path) -> None:
    config = UpstreamConfig(name="missing", command="no-such-command-anywhere", restart_wait=30)
    async with running_fleet([config], tmp_path) as (fleet, _):
        with anyio.fail_after(5):
            await fleet.wait_state("missing", UpstreamState.PARKED)
            with pytest.raises(UpstreamUnavailable, match="temporarily unavailable"):
                await fleet.call_tool("missing", "echo", {})


async def test_one_tool_nested_too_deep_is_skipped_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_fleet([tiny_config("deep", "--deep-tool", "150")], tmp_path) as (fleet, registry):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        assert sorted(registry.tools) == ["deep__echo"]
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert skipped == ["server deep: tool 'deep' skipped: its definition nests deeper than 128 levels"]


async def test_stdout_noise_is_one_named_rate_limited_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with running_fleet([tiny_config("noisy", "--noise", "40")], tmp_path) as (fleet, _):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        for _ in range(5):
            assert text(await fleet.call_tool("noisy", "echo", {"text": "hi"})) == "hi"
    noise = [r for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    assert len(noise) == 1 and "server noisy" in noise[0].getMessage() and noise[0].exc_info is None
    assert not [r for r in caplog.records if r.exc_info]
