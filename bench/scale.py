"""How toolbridge grows with the fleet: from 1,000 to 50,000 tools, and to a hundred stdio upstreams.

Each size is a synthetic fleet of real tools copied and renamed (`bench/fleets.py`), `--per-server`
to a stdio upstream (`bench/catalog_upstream.py`, standard library only, so the proxy is what is
measured). toolbridge runs as `serve --transport http` in a process of its own, and an SDK `Client`
measures, side by side for every size: the time from spawning toolbridge until `/healthz` answers
and until its first `tools/list` (which waits for the whole fleet) answers with every tool
registered; warm `tools/list` and `tool_search` latency (the dev queries of
`../shared/catalogs/queries-dev.json`) with the CPU time toolbridge spent per call (the rest is
transport and client); and the toolbridge process's VmRSS and peak (VmHWM), upstreams not
included. Then the same cold start with a hundred upstreams of 10 tools each, served by that tiny
server and by a real SDK server (`bench/upstream.py`, whose import alone costs about half a second
of CPU per process).
Run: `.venv/bin/python -m bench.scale [--sizes 1000,10000,50000] [--upstreams 100] [--runs 100] [--distinct]`.
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
import yaml
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
    children: int  # upstream processes running when the first tools/list was answered


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


def _children(pid: int) -> int:
    """How many processes `pid` has started that are still running (its stdio upstreams)."""
    return sum(1 for stat in Path("/proc").glob("[0-9]*/stat")
               if (text := _read(stat)) and text[text.rindex(")") + 2:].split()[1] == str(pid))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


async def _run(fleet: Fleet, temp: Path, sdk: bool, runs: int, warm: bool = False) -> Run:
    """One start of toolbridge; `warm`: again on the same config dir (catalogs cached), every upstream lazy."""
    config = temp / "toolbridge"
    if warm:
        toolsets = yaml.safe_load((config / "toolsets.yaml").read_text())
        (config / "toolsets.yaml").write_text(yaml.safe_dump({**toolsets, "lazy": True}))
    else:
        write_toolbridge_config(config, write_fleet(fleet, temp / "tools", sdk=sdk))
    port = free_port()
    command = toolbridge_command(config, "--transport", "http", "--port", str(port), "--context-tokens", "200000")
    started = time.perf_counter()
    with started_server(command, temp / "toolbridge.log") as process:
        await wait_http(f"http://127.0.0.1:{port}/healthz", timeout=120)
        healthz_s = time.perf_counter() - started
        async with (httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=900)) as http,
                    Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client):
            first = await client.list_tools()  # waits for the whole fleet (startup_wait)
            listed_s, listed_cpu_s = time.perf_counter() - started, _cpu_s(process.pid)
            children = _children(process.pid)
            search = next((tool for tool in first.tools if tool.name == "tool_search"), None)
            found = re.search(r"Search (\d+) deferred", search.description or "") if search else None
            list_ms = search_ms = None
            list_cpu = search_cpu = float("nan")
            if runs:
                list_ms, list_cpu = await _timed(runs, lambda _: client.list_tools(cache_mode="bypass"), process.pid)
                search_ms, search_cpu = await _timed(runs, lambda i: client.call_tool(
                    "tool_search", {"queries": [QUERIES[i % len(QUERIES)]]}), process.pid)
            rss, peak = _memory(process.pid)
    return Run(fleet, ("SDK" if sdk else "tiny") + (" warm" if warm else ""), healthz_s, listed_s, listed_cpu_s,
               int(found.group(1)) if found else 0, list_ms, list_cpu, search_ms, search_cpu, rss, peak, children)


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
    """The issue's targets: RSS per tool above an empty toolbridge, and a warm lazy fleet listed in 1 s."""
    empty = next((run for run in runs if not run.fleet.tool_count), None)
    for run in runs:
        if empty is not None and run.fleet.tool_count and run.search_ms is not None:
            above = run.rss_mb - empty.rss_mb
            print(f"{run.fleet.tool_count:>6} tools: RSS {above:.0f} MiB above the empty baseline "
                  f"({empty.rss_mb:.0f} MiB) = {above * 1024 / run.fleet.tool_count:.2f} KiB per tool")
        if run.upstream.endswith("warm"):
            print(f"{run.fleet.label} warm+lazy: listed {run.deferred} tools {run.listed_s:.2f} s after spawn "
                  f"with {run.children} children running")


async def main(sizes: list[int], per_server: int, upstreams: int, runs: int, distinct: bool) -> None:
    print(__doc__.splitlines()[0])
    print(machine_summary())
    plans = [(synthetic_fleet(size, per_server, distinct=distinct), False, runs) for size in sizes]
    if upstreams:
        many = replace(synthetic_fleet(upstreams * 10, per_server=10), label=f"{upstreams} upstreams")
        plans += [(many, False, 0), (many, True, 0)]
    results = []
    for fleet, sdk, count in plans:
        with tempfile.TemporaryDirectory() as temp:
            results.append(await _run(fleet, Path(temp), sdk, count))
            if fleet.label.endswith("upstreams"):  # again, from the catalogs the cold start cached
                results.append(await _run(fleet, Path(temp), sdk, count, warm=True))
        kind = "SDK" if sdk else "tiny"
        print(f"  measured {fleet.label} ({len(fleet.servers)} upstreams, {kind})", file=sys.stderr)
    _report(results)
    print("\nlisted s: spawn of toolbridge -> its first tools/list answered with the whole fleet registered (cold), "
          "cpu s: the CPU toolbridge used by then; "
          f"p50/p99: ms per call from the client over {runs} warm runs; cpu: ms of CPU the toolbridge process spent "
          "per call meanwhile; kind: tiny = bench/catalog_upstream.py, SDK = bench/upstream.py")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,1000,10000,50000",
                        help="fleet sizes in tools, comma-separated (0: the empty baseline)")
    parser.add_argument("--per-server", type=int, default=500, help="tools per upstream in the sized fleets")
    parser.add_argument("--upstreams", type=int, default=100, help="upstreams in the cold-start fleet (0: skip)")
    parser.add_argument("--runs", type=int, default=100, help="warm tools/list and tool_search calls per size")
    parser.add_argument("--distinct", action="store_true",
                        help="no two tools of the sized fleets share a description (copies repeat the real ones')")
    options = parser.parse_args()
    anyio.run(main, [int(s) for s in options.sizes.split(",") if s], options.per_server, options.upstreams,
              options.runs, options.distinct)
