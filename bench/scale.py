"""How toolbridge grows with the fleet: from 1,000 to 50,000 tools, and to a hundred stdio upstreams.

Each size is a synthetic fleet of real tools copied and renamed (`bench/fleets.py`), `--per-server`
to a stdio upstream (`bench/catalog_upstream.py`, standard library only, so the proxy is what is
measured). toolbridge runs as `serve --transport http` in a process of its own, and an SDK `Client`
measures, side by side for every size: the time from spawning toolbridge until `/healthz` answers
and until its first `tools/list` (which waits for the whole fleet) answers with every tool
registered; warm `tools/list` and `tool_search` latency (the dev queries of
`../shared/catalogs/queries-dev.json`) with the CPU time toolbridge spent per call (the rest is
transport and client); the toolbridge process's VmRSS and peak (VmHWM), upstreams not included;
and the warnings toolbridge logged meanwhile (`--hold` keeps each fleet up longer). Then the same
cold start with a hundred upstreams of 10 tools each, served by that tiny server and by a real SDK
server (`bench/upstream.py`, whose import alone costs about half a second of CPU per process).
Run: `.venv/bin/python -m bench.scale [--sizes 1000,10000,50000] [--upstreams 100] [--runs 100] [--hold 0]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.fleets import CATALOGS, Fleet, synthetic_fleet, write_fleet, write_toolbridge_config
from bench.harness import Latency, free_port, machine_summary, started_server, toolbridge_command, wait_http

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
    warnings: int


def _cpu_s(pid: int) -> float:
    """User plus system CPU time the process (all its threads) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory(pid: int) -> tuple[float, float]:
    """VmRSS and VmHWM of one process, in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


async def _timed(runs: int, action: Callable[[int], Awaitable[object]], pid: int) -> tuple[Latency, float]:
    """Latencies of `runs` sequential calls, and the CPU ms toolbridge spent per call meanwhile."""
    await action(0)
    samples = []
    started, cpu = time.perf_counter(), _cpu_s(pid)
    for index in range(runs):
        begin = time.perf_counter()
        await action(index)
        samples.append((time.perf_counter() - begin) * 1000)
    return Latency(samples, time.perf_counter() - started), (_cpu_s(pid) - cpu) * 1000 / runs


async def _run(fleet: Fleet, temp: Path, sdk: bool, runs: int, hold: float) -> Run:
    config = write_toolbridge_config(temp / "toolbridge", write_fleet(fleet, temp / "tools", sdk=sdk))
    port = free_port()
    command = toolbridge_command(config, "--transport", "http", "--port", str(port), "--context-tokens", "200000")
    started = time.perf_counter()
    log = temp / "toolbridge.log"
    with started_server(command, log) as process:
        await wait_http(f"http://127.0.0.1:{port}/healthz", timeout=120)
        healthz_s = time.perf_counter() - started
        async with (httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=900)) as http,
                    Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client):
            first = await client.list_tools()  # waits for the whole fleet (startup_wait)
            listed_s, listed_cpu_s = time.perf_counter() - started, _cpu_s(process.pid)
            search = next(tool for tool in first.tools if tool.name == "tool_search")
            found = re.search(r"Search (\d+) deferred", search.description or "")
            list_ms = search_ms = None
            list_cpu = search_cpu = float("nan")
            if runs:
                list_ms, list_cpu = await _timed(runs, lambda _: client.list_tools(cache_mode="bypass"), process.pid)
                search_ms, search_cpu = await _timed(runs, lambda i: client.call_tool(
                    "tool_search", {"queries": [QUERIES[i % len(QUERIES)]]}), process.pid)
            await anyio.sleep(hold)  # a keepalive round comes every 30 s
            rss, peak = _memory(process.pid)
    warnings = sum(" WARNING " in line or " ERROR " in line for line in log.read_text().splitlines())
    return Run(fleet, "SDK" if sdk else "tiny", healthz_s, listed_s, listed_cpu_s, int(found.group(1)) if found else 0,
               list_ms, list_cpu, search_ms, search_cpu, rss, peak, warnings)


def _latency(latency: Latency | None, cpu_ms: float) -> str:
    if latency is None:
        return f"{'-':>8} {'-':>8} {'-':>6}"
    return f"{latency.median:>8.2f} {latency.p99:>8.2f} {cpu_ms:>6.2f}"


def _report(runs: list[Run]) -> None:
    print(f"\n{'fleet':<18} {'upstreams':>9} {'kind':>4} {'tools':>6} {'healthz s':>9} {'listed s':>8} {'cpu s':>6} "
          f"| tools/list {'p50':>8} {'p99':>8} {'cpu':>6} | tool_search {'p50':>8} {'p99':>8} {'cpu':>6} "
          f"| {'RSS MiB':>8} {'peak MiB':>8} {'warnings':>8}")
    for run in runs:
        flag = "" if run.deferred == run.fleet.tool_count else f"  ! {run.deferred} of {run.fleet.tool_count} listed"
        print(f"{run.fleet.label:<18} {len(run.fleet.servers):>9} {run.upstream:>4} {run.fleet.tool_count:>6} "
              f"{run.healthz_s:>9.2f} {run.listed_s:>8.2f} {run.listed_cpu_s:>6.1f} "
              f"| {'':10} {_latency(run.list_ms, run.list_cpu_ms)} "
              f"| {'':11} {_latency(run.search_ms, run.search_cpu_ms)} "
              f"| {run.rss_mb:>8.0f} {run.peak_mb:>8.0f} {run.warnings:>8}{flag}")
    by_size = [run for run in runs if run.upstream == "tiny" and run.search_ms is not None]
    if len(by_size) > 1:
        small, large = by_size[0], by_size[-1]
        growth = large.fleet.tool_count / small.fleet.tool_count
        per_tool_kib = (large.rss_mb - small.rss_mb) * 1024 / (large.fleet.tool_count - small.fleet.tool_count)
        print(f"\n{small.fleet.tool_count:,} -> {large.fleet.tool_count:,} tools (x{growth:g}): listed in "
              f"x{large.listed_s / small.listed_s:.1f} the time, tool_search p50 "
              f"x{large.search_ms.median / small.search_ms.median:.1f}, RSS x{large.rss_mb / small.rss_mb:.1f} "
              f"(+{per_tool_kib:.1f} KiB per tool)")


async def main(sizes: list[int], per_server: int, upstreams: int, runs: int, hold: float) -> None:
    print(__doc__.splitlines()[0])
    print(machine_summary())
    plans = [(synthetic_fleet(size, per_server), False, runs) for size in sizes]
    if upstreams:
        many = replace(synthetic_fleet(upstreams * 10, per_server=10), label=f"{upstreams} upstreams")
        plans += [(many, False, 0), (many, True, 0)]
    results = []
    for fleet, sdk, count in plans:
        with tempfile.TemporaryDirectory() as temp:
            results.append(await _run(fleet, Path(temp), sdk, count, hold if count else 0))
        kind = "SDK" if sdk else "tiny"
        print(f"  measured {fleet.label} ({len(fleet.servers)} upstreams, {kind})", file=sys.stderr)
    _report(results)
    print("\nlisted s: spawn of toolbridge -> its first tools/list answered with the whole fleet registered (cold), "
          "cpu s: the CPU toolbridge used by then; "
          f"p50/p99: ms per call from the client over {runs} warm runs; cpu: ms of CPU the toolbridge process spent "
          "per call meanwhile; warnings: WARNING/ERROR lines in toolbridge's log (upstream timeouts, reconnects, "
          "withdrawn servers); kind: tiny = bench/catalog_upstream.py, SDK = bench/upstream.py")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000", help="fleet sizes in tools, comma-separated")
    parser.add_argument("--per-server", type=int, default=500, help="tools per upstream in the sized fleets")
    parser.add_argument("--upstreams", type=int, default=100, help="upstreams in the cold-start fleet (0: skip)")
    parser.add_argument("--runs", type=int, default=100, help="warm tools/list and tool_search calls per size")
    parser.add_argument("--hold", type=float, default=0, help="seconds each sized fleet then stays up before the "
                        "memory and log are read (over 30: a keepalive round)")
    options = parser.parse_args()
    anyio.run(main, [int(s) for s in options.sizes.split(",") if s], options.per_server, options.upstreams,
              options.runs, options.hold)
