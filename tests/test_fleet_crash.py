"""A stdio upstream killed with calls in flight: fast errors, unavailability, restart, recovery."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import pytest
from mcp import types
from servers.harness import alive, running_fleet, stdio_config

from proxy.errors import UpstreamError
from proxy.upstream import UpstreamState

pytestmark = pytest.mark.anyio


READY_WITHIN = 30  # generous: starting a Python server takes seconds on a loaded single core


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_killed_upstream_fails_calls_fast_and_comes_back(tmp_path: Path, mode: str) -> None:
    upstreams = [stdio_config("a", restart_wait=READY_WITHIN), stdio_config("b")]
    async with running_fleet(upstreams, tmp_path, mode=mode) as (fleet, registry):
        with anyio.fail_after(READY_WITHIN):
            await fleet.ready.wait()
        pid = int(text(await fleet.call_tool("a", "pid", {})))
        errors: list[tuple[UpstreamError, float]] = []

        async def doomed_call() -> None:
            with pytest.raises(UpstreamError) as caught:
                await fleet.call_tool("a", "sleep", {"seconds": 30})
            errors.append((caught.value, time.monotonic()))

        async with anyio.create_task_group() as calls:
            for _ in range(3):
                calls.start_soon(doomed_call)
            await anyio.wait_all_tasks_blocked()
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            with anyio.fail_after(2):
                await fleet.wait_state("a", UpstreamState.BACKOFF)
        latency = max(at for _, at in errors) - killed_at
        print(f"kill-to-error latency {latency * 1000:.0f} ms")
        assert latency < 2
        assert all("outcome of the call is uncertain" in str(e) for e, _ in errors)
        assert not fleet.is_ready("a")
        assert "a__echo" in registry.tools  # kept listed through the flake window (SPEC 6.7)
        assert text(await fleet.call_tool("b", "echo", {"text": "b is fine"})) == "b is fine"
        with anyio.fail_after(READY_WITHIN):  # a call during the restart waits for it (SPEC 6.7)
            assert text(await fleet.call_tool("a", "echo", {"text": "now?"})) == "now?"

        with anyio.fail_after(READY_WITHIN):
            await fleet.wait_state("a", UpstreamState.READY)
        print(f"restart time {time.monotonic() - killed_at:.2f} s")
        assert not alive(pid)
        assert text(await fleet.call_tool("a", "echo", {"text": "back"})) == "back"
        assert int(text(await fleet.call_tool("a", "pid", {}))) != pid


async def test_availability_follows_state_and_lapses_after_the_grace(tmp_path: Path) -> None:
    down = tmp_path / "down"  # while it exists, the server exits at start: it stays down past the grace
    async with running_fleet([stdio_config("a", "--fail-while", str(down))], tmp_path, grace=0.5,
                             park_after=100) as (fleet, registry):
        with anyio.fail_after(READY_WITHIN):
            await fleet.ready.wait()
        assert fleet.availability("a")
        pid = int(text(await fleet.call_tool("a", "pid", {})))
        generation = registry.generation
        down.touch()
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(READY_WITHIN):
            await fleet.wait_state("a", UpstreamState.BACKOFF)
        assert registry.generation > generation  # sessions are told to re-evaluate
        assert fleet.availability("a")  # a flake: still offered within the grace
        with anyio.fail_after(READY_WITHIN):
            while fleet.availability("a"):  # lapses with the bump after the grace
                await registry.wait_for_change(registry.generation)
        assert not fleet.is_ready("a")
        down.unlink()
        with anyio.fail_after(READY_WITHIN):
            await fleet.wait_state("a", UpstreamState.READY)
        assert fleet.availability("a")
