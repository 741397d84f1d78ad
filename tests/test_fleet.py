"""Fleet over real stdio upstreams: registration, dynamic tools, calls, bad upstreams, shutdown."""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import anyio
import pytest
from mcp import types
from servers.controllable import PAGE_SIZE
from servers.controllable import State as ControllableState
from servers.harness import alive, descendants, running_fleet, stdio_config, tiny_config, wait_for

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable
from proxy.registry import Registry, ServerChange
from proxy.upstream import UpstreamState
from proxy.upstream.fleet import _supervisor
from proxy.upstream.fleet._supervisor import REFRESH_BURST, REFRESH_INTERVAL

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_published_servers_register_and_answer(tmp_path: Path) -> None:
    upstreams = [
        UpstreamConfig(name="everything", command="mcp-server-everything", args=("stdio",)),
        UpstreamConfig(name="memory", command="mcp-server-memory"),
        UpstreamConfig(name="time", command="mcp-server-time"),
    ]
    async with running_fleet(upstreams, tmp_path) as (fleet, registry):
        with anyio.fail_after(20):
            await fleet.ready.wait()
        assert all(s.state is UpstreamState.READY for s in fleet.status()), fleet.status()
        # server-everything registers this one only after `initialized`, announced by list_changed.
        with anyio.fail_after(5):
            await wait_for(lambda: "everything__simulate-research-query" in registry.tools, registry)
        assert {"everything__echo", "everything__get-sum", "memory__read_graph",
                "time__get_current_time"} <= set(registry.tools)
        result = await fleet.call_tool("everything", "get-sum", {"a": 2, "b": 3})
        assert "5" in text(result)
        assert not (result.meta or {}).get(types.SERVER_INFO_META_KEY)


@pytest.mark.parametrize("mode", MODES)
async def test_all_pages_are_listed_and_filters_apply(tmp_path: Path, mode: str) -> None:
    upstreams = [
        stdio_config("all", "--extra-tools", "12"),
        stdio_config("some", "--extra-tools", "12", tools={"include": ["filler_*", "echo"],
                                                            "exclude": ["filler_00*"]}),
    ]
    async with running_fleet(upstreams, tmp_path, mode=mode) as (fleet, registry):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        served = len(ControllableState(extra_tools=12).tools)
        assert served > 4 * PAGE_SIZE and len(registry.server_tools("all")) == served
        assert sorted(e.raw_name for e in registry.server_tools("some").values()) == [
            "echo", "filler_010", "filler_011"]


async def test_stdio_child_gets_safe_env_plus_its_own_cwd_and_logs_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLBRIDGE_TEST_PARENT_SECRET", "do-not-inherit")
    (tmp_path / "work").mkdir()
    config = stdio_config("a", env={"GREETING": "hello"}, cwd="work")
    async with running_fleet([config], tmp_path) as (fleet, _):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        seen = json.loads(text(await fleet.call_tool("a", "environment", {})))
    assert seen["cwd"] == str(tmp_path / "work")  # a relative cwd is resolved against the config dir
    assert seen["env"]["GREETING"] == "hello" and "PATH" in seen["env"]
    assert "TOOLBRIDGE_TEST_PARENT_SECRET" not in seen["env"]
    assert "controllable" in (tmp_path / "logs" / "a.log").read_text()


@pytest.mark.parametrize("mode", MODES)
async def test_tool_changes_are_registered_with_one_bump_per_refresh(tmp_path: Path, mode: str) -> None:
    async with running_fleet([stdio_config("a")], tmp_path, mode=mode) as (fleet, registry):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        steps = [
            ("add_tool", {"name": "fresh"}, lambda: "a__fresh" in registry.tools),
            ("change_tool", {"name": "fresh", "description": "changed"},
             lambda: registry.tools["a__fresh"].description == "changed"),
            ("remove_tool", {"name": "fresh"}, lambda: "a__fresh" not in registry.tools),
        ]
        for tool, arguments, done in steps:
            before = registry.generation
            await fleet.call_tool("a", tool, arguments)
            with anyio.fail_after(5):
                await wait_for(done, registry)
            assert registry.generation == before + 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_burst_of_notifications_costs_few_refreshes(tmp_path: Path, mode: str) -> None:
    async with running_fleet([stdio_config("a")], tmp_path, mode=mode) as (fleet, registry):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        before = registry.generation
        await fleet.call_tool("a", "burst", {"count": 20})
        with anyio.fail_after(5):
            await wait_for(lambda: all(f"a__burst_{i}" in registry.tools for i in range(20)), registry)
        assert registry.generation - before <= 3  # 20 notifications, at most a few re-lists


class ListingClock(Registry):
    """The real registry, noting when each server's tools are registered (each listing ends so)."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: dict[str, list[float]] = defaultdict(list)

    async def set_server_tools_sliced(
        self, server: str, tools: Iterable[types.Tool], *, prefix: bool = True
    ) -> ServerChange:
        self.listed[server].append(anyio.current_time())
        return await super().set_server_tools_sliced(server, tools, prefix=prefix)


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_announcing_a_change_after_every_listing_is_relisted_at_most_once_a_second(
    tmp_path: Path, mode: str
) -> None:
    """A token bucket's promise, in any window: at most the burst plus one listing per interval. Timed at
    registration, a listing's own length moves its end, so one listing of slack (a loaded machine can
    only lower the count; an unlimited server lists the six below within a fraction of a second)."""
    registry = ListingClock()
    upstreams = [stdio_config("storm", "--storm"), stdio_config("calm")]
    async with running_fleet(upstreams, tmp_path, registry, mode=mode) as (fleet, _):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        with anyio.fail_after(15):
            while len(registry.listed["storm"]) < REFRESH_BURST + 3:
                assert text(await fleet.call_tool("calm", "echo", {"text": "still here"})) == "still here"
        listed = list(registry.listed["storm"])  # before shutdown withdraws the server
    for first, last in itertools.combinations(range(len(listed)), 2):
        window = listed[last] - listed[first]
        assert last - first + 1 <= REFRESH_BURST + window / REFRESH_INTERVAL + 1, (listed, first, last)


async def test_a_change_after_a_quiet_interval_and_the_next_right_after_it_are_relisted_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    interval = 3.0  # longer than the real one, so the bound below leaves room for a loaded machine
    monkeypatch.setattr(_supervisor, "REFRESH_INTERVAL", interval)
    registry = ListingClock()
    async with running_fleet([stdio_config("a")], tmp_path, registry) as (fleet, _):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        await anyio.sleep(interval)  # not to synchronise: the quiet interval is the case under test
        await fleet.call_tool("a", "add_tool", {"name": "fresh"})
        with anyio.fail_after(interval - 0.5):  # a held change would wait out a whole interval
            await wait_for(lambda: "a__fresh" in registry.tools, registry)
        await fleet.call_tool("a", "add_tool", {"name": "fresher"})  # and the next change, right after it
        with anyio.fail_after(interval - 0.5):
            await wait_for(lambda: "a__fresher" in registry.tools, registry)


async def test_twenty_upstreams_start_concurrently(tmp_path: Path) -> None:
    """Within 9 s: before the slow one starts (10 s). The issue's 3 s is a benchmark gate on a quiet machine
    (`python -m bench.latency_gates --only fleet-start`)."""
    upstreams = [tiny_config(f"s{i:02d}") for i in range(18)]
    upstreams += [tiny_config("slow", "--slow-start", "10", connect_timeout=30),
                  tiny_config("silent", "--hang", connect_timeout=2)]
    started = time.monotonic()
    async with running_fleet(upstreams, tmp_path) as (fleet, registry):
        with anyio.fail_after(9):
            await wait_for(lambda: all(fleet.is_ready(f"s{i:02d}") for i in range(18)), registry)
        elapsed = time.monotonic() - started
        print(f"18 of 20 upstreams registered in {elapsed:.2f} s")
        assert len(registry.servers) == 18
        assert not fleet.ready.is_set()  # the slow one has neither registered nor failed yet
        with anyio.fail_after(5):
            await fleet.wait_state("silent", UpstreamState.BACKOFF)
        assert "connect_timeout" in fleet.status()[-2].reason  # sorted: ..., silent, slow


@pytest.mark.alone
@pytest.mark.parametrize("mode", MODES)
async def test_progress_timeout_and_cancellation_reach_upstream(tmp_path: Path, mode: str) -> None:
    async with running_fleet([stdio_config("a", timeout=0.5)], tmp_path, mode=mode) as (fleet, _):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        result = await fleet.call_tool("a", "sleep", {"seconds": 0.2, "steps": 3}, on_progress)
        assert text(result) == "slept"
        assert [p for p, _, _ in seen] == [1, 2, 3] and seen[-1][1:] == (3, "step 3")

        started = time.monotonic()
        with pytest.raises(UpstreamTimeout, match=r"upstream 'a'.*within 0\.5 s"):
            await fleet.call_tool("a", "sleep", {"seconds": 30})
        assert time.monotonic() - started < 2
        with anyio.fail_after(5):
            while text(await fleet.call_tool("a", "cancelled_count", {})) != "1":
                await anyio.sleep(0.02)

        with anyio.move_on_after(0.2):
            await fleet.call_tool("a", "sleep", {"seconds": 0.4})
        with anyio.fail_after(5):
            while text(await fleet.call_tool("a", "cancelled_count", {})) != "2":
                await anyio.sleep(0.02)
        assert fleet.is_ready("a")


async def test_a_result_that_breaks_its_own_output_schema_is_a_clear_error(tmp_path: Path) -> None:
    async with running_fleet([stdio_config("a")], tmp_path) as (fleet, _):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        with pytest.raises(UpstreamError, match=r"upstream 'a': tool 'bad_structured': .*structured content"):
            await fleet.call_tool("a", "bad_structured", {})
        result = await fleet.call_tool("a", "echo", {"text": "hi"})
        assert result.meta is None  # the modern serverInfo stamp is stripped


@pytest.mark.alone
async def test_bad_upstreams_park_and_never_disturb_the_others(tmp_path: Path) -> None:
    gate = tmp_path / "fail"
    gate.touch()
    upstreams = [
        stdio_config("good"),
        UpstreamConfig(name="missing", command="no-such-command-anywhere"),
        UpstreamConfig(name="nodir", command=sys.executable, cwd="does/not/exist"),
        tiny_config("flaky", "--fail-while", str(gate)),
        tiny_config("off", enabled=False),
    ]
    started = time.monotonic()
    async with running_fleet(upstreams, tmp_path, park_after=2, reprobe=0.5) as (fleet, registry):
        with anyio.fail_after(1):
            await fleet.wait_state("missing", UpstreamState.PARKED)
        assert time.monotonic() - started < 1
        status = {s.name: s for s in fleet.status()}
        assert "command not found: 'no-such-command-anywhere'" in status["missing"].reason
        assert "working directory does not exist" in status["nodir"].reason
        assert status["off"].state is UpstreamState.DISABLED and not (tmp_path / "logs" / "off.log").exists()
        with anyio.fail_after(5):
            await fleet.wait_state("flaky", UpstreamState.BACKOFF)
        assert "exited during startup" in fleet.status()[0].reason
        with anyio.fail_after(20):
            await fleet.wait_state("flaky", UpstreamState.PARKED)
            await fleet.wait_state("good", UpstreamState.READY)
            assert text(await fleet.call_tool("good", "echo", {"text": "hi"})) == "hi"
            with pytest.raises(UpstreamUnavailable, match="temporarily unavailable"):
                await fleet.call_tool("flaky", "echo", {"text": "hi"})
            gate.unlink()  # the server can start now: the next re-probe brings it back
            await fleet.wait_state("flaky", UpstreamState.READY)
        assert "flaky__echo" in registry.tools
        assert fleet.is_ready("good")


async def test_stopping_leaves_no_process_behind(tmp_path: Path) -> None:
    before = descendants()
    upstreams = [
        stdio_config("a"),
        stdio_config("parent", "--spawn-grandchild"),
        UpstreamConfig(name="everything", command="mcp-server-everything", args=("stdio",)),
        stdio_config("silent", "--hang", connect_timeout=60),
    ]
    async with running_fleet(upstreams, tmp_path) as (fleet, _):
        with anyio.fail_after(10):
            await wait_for(lambda: sum(fleet.is_ready(u.name) for u in upstreams) == 3, fleet.registry)
        spawned = descendants() - before
        assert len(spawned) >= 5  # four children and the grandchild
    with anyio.fail_after(10):  # our children are reaped; the orphaned grandchild is killed
        await wait_for(lambda: not (descendants() - before) and not any(alive(p) for p in spawned))
