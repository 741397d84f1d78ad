"""How toolbridge grows with the fleet: from 1,000 to 50,000 tools, and to a hundred stdio upstreams.

Each size is a synthetic fleet of real tools copied and renamed (`bench/fleets.py`), `--per-server`
to a stdio upstream (`bench/catalog_upstream.py`, standard library only, so the proxy is what is
measured). toolbridge runs as `serve --transport http` in a process of its own, and an SDK `Client`
measures, side by side for every size: the time from spawning toolbridge until `/healthz` answers
and until its first `tools/list` (which waits for the whole fleet) answers with every tool
registered; warm `tools/list` and `tool_search` latency (the dev queries of
`bench/catalogs/queries-dev.json`) with the CPU time toolbridge spent per call (the rest is
transport and client); and the toolbridge process's VmRSS and peak (VmHWM), upstreams not
included. Then the same cold start with a hundred upstreams of 10 tools each, served by that tiny
server and by a real SDK server (`bench/upstream.py`, whose import alone costs about half a second
of CPU per process), and `--warm-runs` warm starts on each one's cached catalogs with every upstream
lazy, over stdio (the client spawns toolbridge and sends `initialize` at once) and over HTTP: each
from spawn to the first `tools/list` answer, split by `bench/stamped.py` into the interpreter's
start, importing the SDK, importing toolbridge, and the rest (wall and toolbridge's CPU).
Run: `.venv/bin/python -m bench.scale [--sizes 1000,10000,50000] [--upstreams 100] [--runs 100] [--warm-runs 5]
[--distinct]` (`--distinct`: no two tools of the sized fleets share a description).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import httpx2
import yaml
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client

from bench.fleets import CATALOGS, Fleet, synthetic_fleet, write_fleet, write_toolbridge_config
from bench.harness import (
    REPO,
    Latency,
    child_pids,
    cpu_seconds,
    free_port,
    machine_summary,
    started_server,
    toolbridge_command,
    wait_http,
)

QUERIES = [entry["query"] for entry in json.loads((CATALOGS / "queries-dev.json").read_text())]


@dataclass(frozen=True)
class Run:
    fleet: Fleet
    upstream: str
    healthz_s: float
    listed_s: float
    listed_cpu_s: float
    deferred: int
    list_ms: Latency | None
    list_cpu_ms: float
    search_ms: Latency | None
    search_cpu_ms: float
    rss_mb: float
    peak_mb: float
    children: int  # upstream processes running when the first tools/list was answered


def _memory(pid: int) -> tuple[float, float]:
    """VmRSS and VmHWM of one process, in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


async def _timed(runs: int, action: Callable[[int], Awaitable[object]], pid: int) -> tuple[Latency, float]:
    """Latencies of `runs` sequential calls, and the CPU ms toolbridge spent per call meanwhile."""
    await action(0)
    samples = []
    started, cpu = time.perf_counter(), cpu_seconds(pid)
    for index in range(runs):
        begin = time.perf_counter()
        await action(index)
        samples.append((time.perf_counter() - begin) * 1000)
    return Latency(samples, time.perf_counter() - started), (cpu_seconds(pid) - cpu) * 1000 / runs


async def _run(fleet: Fleet, temp: Path, sdk: bool, runs: int) -> Run:
    """One cold start of toolbridge over HTTP: every upstream is started and listed (which caches its catalog)."""
    config = write_toolbridge_config(temp / "toolbridge", write_fleet(fleet, temp / "tools", sdk=sdk))
    port = free_port()
    command = toolbridge_command(config, "--transport", "http", "--port", str(port), "--context-tokens", "200000")
    started = time.perf_counter()
    with started_server(command, temp / "toolbridge.log") as process:
        await wait_http(f"http://127.0.0.1:{port}/healthz", timeout=120)
        healthz_s = time.perf_counter() - started
        async with (httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=900)) as http,
                    Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client):
            first = await client.list_tools()  # waits for the whole fleet (startup_wait)
            listed_s, listed_cpu_s = time.perf_counter() - started, cpu_seconds(process.pid)
            children = len(child_pids(process.pid))
            list_ms = search_ms = None
            list_cpu = search_cpu = float("nan")
            if runs:
                list_ms, list_cpu = await _timed(runs, lambda _: client.list_tools(cache_mode="bypass"), process.pid)
                search_ms, search_cpu = await _timed(runs, lambda i: client.call_tool(
                    "tool_search", {"queries": [QUERIES[i % len(QUERIES)]]}), process.pid)
            rss, peak = _memory(process.pid)
    return Run(fleet, "SDK" if sdk else "tiny", healthz_s, listed_s, listed_cpu_s, _deferred(first), list_ms,
               list_cpu, search_ms, search_cpu, rss, peak, children)


def _deferred(listed: types.ListToolsResult) -> int:
    """How many tools the `tool_search` description says it searches."""
    search = next((tool for tool in listed.tools if tool.name == "tool_search"), None)
    found = re.search(r"Search (\d+) deferred", search.description or "") if search else None
    return int(found.group(1)) if found else 0


# --- warm starts: a cached, lazy fleet -----------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """One warm start, phase by phase: wall seconds from spawn, and toolbridge's CPU seconds per phase."""

    transport: str
    kind: str
    listed_s: float  # spawn -> first tools/list answered
    interpreter_s: float  # spawn -> the interpreter runs bench/stamped.py's first line
    interpreter_cpu_s: float
    sdk_s: float  # importing `mcp`
    sdk_cpu_s: float
    own_s: float  # importing toolbridge past `mcp`
    own_cpu_s: float
    after_s: float  # imports done -> first tools/list answered (config, cache, fleet, transport, the requests)
    after_cpu_s: float
    deferred: int
    children: int
    rss_mb: float


@contextlib.asynccontextmanager
async def _warm_client(transport: str, command: list[str], log: Path) -> AsyncIterator[Client]:
    """A client of toolbridge spawned now: over stdio its first request goes out at once; over HTTP it is
    sent as soon as `/healthz` answers (polled every 10 ms)."""
    if transport == "stdio":
        params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO))
        with open(log, "ab") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
                yield client
        return
    port = command[command.index("--port") + 1]
    with started_server(command, log):
        await wait_http(f"http://127.0.0.1:{port}/healthz", timeout=120, interval=0.01)
        async with (httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120)) as http,
                    Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client):
            yield client


async def _warm_start(config: Path, temp: Path, transport: str, kind: str) -> Start:
    """Spawn toolbridge on a config dir whose catalogs are cached and whose upstreams are lazy; list once."""
    stamp_path = temp / "stamp.json"
    stamp_path.unlink(missing_ok=True)
    extra = ("--transport", "http", "--port", str(free_port())) if transport == "http" else ()
    command = toolbridge_command(config, *extra, "--context-tokens", "200000", stamp=stamp_path)
    spawned = time.time()
    async with _warm_client(transport, command, temp / "toolbridge.log") as client:
        listed = await client.list_tools()
        answered = time.time()
        stamp = json.loads(stamp_path.read_text())
        cpu, children, (rss, _) = cpu_seconds(stamp["pid"]), len(child_pids(stamp["pid"])), _memory(stamp["pid"])
    (up, up_cpu), (sdk, sdk_cpu), (imported, imported_cpu) = stamp["up"], stamp["sdk"], stamp["imported"]
    return Start(transport, kind, answered - spawned, up - spawned, up_cpu, sdk - up, sdk_cpu - up_cpu,
                 imported - sdk, imported_cpu - sdk_cpu, answered - imported, cpu - imported_cpu,
                 _deferred(listed), children, rss)


async def _warm_starts(config: Path, temp: Path, kind: str, count: int) -> list[Start]:
    """`count` warm starts over each transport, taking turns, after making every upstream lazy."""
    toolsets = yaml.safe_load((config / "toolsets.yaml").read_text())
    (config / "toolsets.yaml").write_text(yaml.safe_dump({**toolsets, "lazy": True}))
    return [await _warm_start(config, temp, transport, kind) for _ in range(count) for transport in ("stdio", "http")]


def _median(starts: list[Start], field: str) -> float:
    return statistics.median(getattr(start, field) for start in starts)


def _warm_report(starts: list[Start], tools: int) -> None:
    """Medians per transport and kind; the phases add up to `listed` (the client's own share aside)."""
    print("\nwarm cache, lazy (median of the starts per row): seconds from spawn to the first tools/list answer, "
          "then each phase as wall / toolbridge's CPU seconds")
    print(f"{'transport':>9} {'kind':>4} {'listed s':>8} | {'interpreter':>11} | {'import mcp':>11} | "
          f"{'import toolbridge':>17} | {'after imports':>13} | {'of which CPU':>12} | {'RSS MiB':>7} {'children':>8}")
    for transport in ("stdio", "http"):
        for kind in ("tiny", "SDK"):
            rows = [start for start in starts if start.transport == transport and start.kind == kind]
            if not rows:
                continue
            flags = {f"  ! {r.deferred} of {tools} listed" for r in rows if r.deferred != tools}
            print(f"{transport:>9} {kind:>4} {_median(rows, 'listed_s'):>8.2f} | "
                  f"{_median(rows, 'interpreter_s'):>5.2f}/{_median(rows, 'interpreter_cpu_s'):<5.2f} | "
                  f"{_median(rows, 'sdk_s'):>5.2f}/{_median(rows, 'sdk_cpu_s'):<5.2f} | "
                  f"{_median(rows, 'own_s'):>11.2f}/{_median(rows, 'own_cpu_s'):<5.2f} | "
                  f"{_median(rows, 'after_s'):>13.2f} | {_median(rows, 'after_cpu_s'):>12.2f} | "
                  f"{_median(rows, 'rss_mb'):>7.0f} {max(r.children for r in rows):>8}{''.join(sorted(flags))}")
    floor = _median(starts, "interpreter_s") + _median(starts, "sdk_s")
    print(f"the SDK's floor (interpreter + import mcp, every start): {floor:.2f} s; toolbridge's share after it: "
          f"imports {_median(starts, 'own_s'):.2f} s wall / {_median(starts, 'own_cpu_s'):.2f} s CPU, "
          f"start to first answer {_median(starts, 'after_s'):.2f} s wall / "
          f"{_median(starts, 'after_cpu_s'):.2f} s CPU; children running at the first answer: "
          f"{max(start.children for start in starts)}")


def _latency(latency: Latency | None, cpu_ms: float) -> str:
    if latency is None:
        return f"{'-':>8} {'-':>8} {'-':>6}"
    return f"{latency.median:>8.2f} {latency.p99:>8.2f} {cpu_ms:>6.2f}"


def _report(runs: list[Run]) -> None:
    print(f"\n{'fleet':<18} {'upstreams':>9} {'kind':>4} {'tools':>6} {'healthz s':>9} {'listed s':>8} {'cpu s':>6} "
          f"| tools/list {'p50':>8} {'p99':>8} {'cpu':>6} | tool_search {'p50':>8} {'p99':>8} {'cpu':>6} "
          f"| {'RSS MiB':>8} {'peak MiB':>8} {'children':>8}")
    for run in runs:
        flag = "" if run.deferred == run.fleet.tool_count else f"  ! {run.deferred} of {run.fleet.tool_count} listed"
        print(f"{run.fleet.label:<18} {len(run.fleet.servers):>9} {run.upstream:>4} {run.fleet.tool_count:>6} "
              f"{run.healthz_s:>9.2f} {run.listed_s:>8.2f} {run.listed_cpu_s:>6.1f} "
              f"| {'':10} {_latency(run.list_ms, run.list_cpu_ms)} "
              f"| {'':11} {_latency(run.search_ms, run.search_cpu_ms)} "
              f"| {run.rss_mb:>8.0f} {run.peak_mb:>8.0f} {run.children:>8}{flag}")
    _verdicts(runs)
    by_size = [run for run in runs if run.upstream == "tiny" and run.search_ms is not None and run.fleet.tool_count]
    if len(by_size) > 1:
        small, large = by_size[0], by_size[-1]
        growth = large.fleet.tool_count / small.fleet.tool_count
        per_tool_kib = (large.rss_mb - small.rss_mb) * 1024 / (large.fleet.tool_count - small.fleet.tool_count)
        print(f"\n{small.fleet.tool_count:,} -> {large.fleet.tool_count:,} tools (x{growth:g}): listed in "
              f"x{large.listed_s / small.listed_s:.1f} the time, tool_search p50 "
              f"x{large.search_ms.median / small.search_ms.median:.1f}, RSS x{large.rss_mb / small.rss_mb:.1f} "
              f"(+{per_tool_kib:.1f} KiB per tool)")


def _verdicts(runs: list[Run]) -> None:
    """The issue's target for memory: RSS per tool above an empty toolbridge."""
    empty = next((run for run in runs if not run.fleet.tool_count), None)
    for run in runs:
        if empty is not None and run.fleet.tool_count and run.search_ms is not None:
            above = run.rss_mb - empty.rss_mb
            print(f"{run.fleet.tool_count:>6} tools: RSS {above:.0f} MiB above the empty baseline "
                  f"({empty.rss_mb:.0f} MiB) = {above * 1024 / run.fleet.tool_count:.2f} KiB per tool")


async def main(sizes: list[int], per_server: int, upstreams: int, runs: int, warm_runs: int,
               distinct: bool) -> None:
    print(__doc__.splitlines()[0])
    print(machine_summary())
    plans = [(synthetic_fleet(size, per_server, distinct=distinct), False, runs) for size in sizes]
    if upstreams:
        many = replace(synthetic_fleet(upstreams * 10, per_server=10), label=f"{upstreams} upstreams")
        plans += [(many, False, 0), (many, True, 0)]
    results, starts = [], []
    for fleet, sdk, count in plans:
        kind = "SDK" if sdk else "tiny"
        with tempfile.TemporaryDirectory() as temp:
            results.append(await _run(fleet, Path(temp), sdk, count))
            if fleet.label.endswith("upstreams") and warm_runs:  # again, from the catalogs the cold start cached
                starts += await _warm_starts(Path(temp) / "toolbridge", Path(temp), kind, warm_runs)
        print(f"  measured {fleet.label} ({len(fleet.servers)} upstreams, {kind})", file=sys.stderr)
    _report(results)
    print("\nlisted s: spawn of toolbridge -> its first tools/list answered with the whole fleet registered (cold), "
          "cpu s: the CPU toolbridge used by then; "
          f"p50/p99: ms per call from the client over {runs} warm runs; cpu: ms of CPU the toolbridge process spent "
          "per call meanwhile; kind: tiny = bench/catalog_upstream.py, SDK = bench/upstream.py")
    if starts:
        _warm_report(starts, upstreams * 10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,1000,10000,50000",
                        help="fleet sizes in tools, comma-separated (0: the empty baseline)")
    parser.add_argument("--per-server", type=int, default=500, help="tools per upstream in the sized fleets")
    parser.add_argument("--upstreams", type=int, default=100, help="upstreams in the cold-start fleet (0: skip)")
    parser.add_argument("--runs", type=int, default=100, help="warm tools/list and tool_search calls per size")
    parser.add_argument("--warm-runs", type=int, default=5,
                        help="warm, lazy starts of the upstream fleet per transport and kind (0: skip)")
    parser.add_argument("--distinct", action="store_true",
                        help="no two tools of the sized fleets share a description (copies repeat the real ones')")
    options = parser.parse_args()
    anyio.run(main, [int(s) for s in options.sizes.split(",") if s], options.per_server, options.upstreams,
              options.runs, options.warm_runs, options.distinct)
