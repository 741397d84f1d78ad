"""Throughput of 1 vs 3 toolbridge replicas behind nginx on this machine, side by side, and what a replica costs.

Both runs are the deployment of `deploy/`: nginx with `deploy/nginx.conf`, replicas started with
`--replica-id` and `--redis-url`, Redis. The single-replica run points all three of nginx's replica
names at one process. Clients (half handshake-era, half 2026-era) call one core tool as fast as they
can for a fixed time; the table gives calls/s, p50 and p99. Then each replica's cost: its own RSS,
its upstream children and their RSS.
Run: `.venv/bin/python -m bench.replicas [--clients 32] [--seconds 10] [--config-dir DIR] [--tool NAME]`
(default: the bundled fleet in this repo and `time__get_current_time`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.servers.cluster import REPO, free_port, nginx, redis_server, replica


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0  # a zombie has no RSS line


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc (ppid is the field after the parenthesised name)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


async def load(base: str, clients: int, seconds: float, tool: str, arguments: dict[str, Any]) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds

    async def one_client(index: int) -> None:
        nonlocal errors
        async with Client(streamable_http_client(f"{base}/mcp"), mode="legacy" if index % 2 else "auto") as client:
            await client.list_tools()
            while time.monotonic() < deadline:
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                latencies.append(time.perf_counter() - started)
                errors += result.is_error

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        for index in range(clients):
            tg.start_soon(one_client, index)
    elapsed = time.monotonic() - started
    ordered = sorted(latencies)
    return {"calls": len(ordered), "errors": errors, "calls_s": len(ordered) / elapsed,
            "p50_ms": 1000 * statistics.median(ordered), "p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))]}


async def run(count: int, args: argparse.Namespace, workdir: Path) -> tuple[dict[str, float], list[dict[str, int]]]:
    names = [f"toolbridge-{i}" for i in range(3)]
    ports = [free_port() for _ in range(count)]
    async with redis_server(workdir / f"redis-{count}") as redis_url, AsyncExitStack() as stack:
        processes = [await stack.enter_async_context(replica(args.config_dir, port, name, "--redis-url", redis_url))
                     for name, port in zip(names, ports, strict=False)]
        routes = [(name, ports[i % count]) for i, name in enumerate(names)]
        base = await stack.enter_async_context(nginx(workdir / f"nginx-{count}", routes))
        figures = await load(base, args.clients, args.seconds, args.tool, {"timezone": "UTC"})
        costs = []
        for process in processes:
            children = descendants(process.pid)
            costs.append({"rss_mib": rss_kib(process.pid) // 1024, "children": len(children),
                          "children_rss_mib": sum(rss_kib(c) for c in children) // 1024})
        return figures, costs


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp:
        results = {count: await run(count, args, Path(tmp)) for count in (1, 3)}
    print(f"{os.cpu_count()} cores; {args.clients} clients (half per era) calling {args.tool} for {args.seconds:g} s "
          "through nginx\n")
    print("| replicas | calls | calls/s | p50 ms | p99 ms | errors |")
    print("|---|---|---|---|---|---|")
    for count, (figures, _) in results.items():
        print(f"| {count} | {figures['calls']} | {figures['calls_s']:.0f} | {figures['p50_ms']:.1f} | "
              f"{figures['p99_ms']:.1f} | {figures['errors']} |")
    print("\n| replica | RSS MiB | upstream children | their RSS MiB |")
    print("|---|---|---|---|")
    for index, cost in enumerate(results[3][1]):
        print(f"| toolbridge-{index} | {cost['rss_mib']} | {cost['children']} | {cost['children_rss_mib']} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--config-dir", type=Path, default=REPO)
    parser.add_argument("--tool", default="time__get_current_time")
    anyio.run(main, parser.parse_args())
