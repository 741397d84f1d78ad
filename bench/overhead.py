"""What a proxy adds to one tool call: the same no-op call straight to the upstream, through toolbridge
(as a core tool and through `tool_call`) and through FastMCP's proxy, side by side in one run.
A bare SDK relay (`bench/relay.py`) marks the floor: the cost of the extra hop alone.

The fleet behind each proxy is two copies of `bench/upstream.py` (`echo` and `spare`), so both
proxies aggregate; every call goes to `echo`. Each transport is used end to end: over stdio the
client spawns the server and every proxy spawns its upstreams; over HTTP every upstream and
proxy is its own Streamable HTTP server on 127.0.0.1. With C callers, C tasks share one stdio
connection (a stdio server has one client), or each has its own HTTP session. Every client is an
SDK v2 `Client` in this venv; FastMCP runs in `.bench-venv/fastmcp` (`bench/setup.sh`). Beside the
latency, each cell reports the CPU time per call of the server process the client talks to (its own
upstreams not included), which a loaded machine disturbs far less than wall-clock latency.
All servers stay up for the whole run; after a 0.3 s warm-up per route, each cell (route x callers)
calls for `--seconds` in `--rounds` slices, the cells taking turns in a shuffled order (all 1-caller
cells, then all 32-caller ones), so load from elsewhere on the machine falls on every cell alike.
`--routes` measures a subset (e.g. `--transports stdio --callers 1 --routes relay,core,tool_call`,
the issue's column, quickly and repeatably); `--baseline DIR` adds toolbridge from another checkout
(`git archive main | tar -x -C DIR`) beside this one, for before/after in one run.
Run: `.venv/bin/python -m bench.overhead [--seconds 2] [--callers 1,32] [--transports stdio,http]
[--routes direct,relay,core,tool_call,fastmcp_mount,fastmcp_config] [--baseline DIR]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import yaml
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from bench.harness import (
    FASTMCP_PYTHON,
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

SERVERS = ("echo", "spare")
UPSTREAM = [sys.executable, "-m", "bench.upstream"]
RELAY_COMMAND = [sys.executable, "-m", "bench.relay"]
CELL_TIMEOUT = 300.0  # one round of every cell
WARM_UP_S = 0.3


@dataclass(frozen=True)
class Route:
    """One way to reach the echo tool: a label, the tool to call and how to wrap the arguments.

    `one_caller_only`: measured with more callers only under `--all-cells` (too slow otherwise).
    """

    label: str
    tool: str
    wrap: Callable[[dict[str, Any]], dict[str, Any]]
    one_caller_only: bool = False


DIRECT = Route("direct to the upstream", "echo", lambda a: a)
RELAY = Route("SDK relay, one upstream (floor)", "echo", lambda a: a)
CORE = Route("toolbridge, core tool", "echo__echo", lambda a: a)
BRIDGE = Route("toolbridge, tool_call", "tool_call", lambda a: {"name": "echo__echo_deferred", "arguments": a})
FASTMCP_MOUNT = Route("FastMCP, mounted proxies", "echo_echo", lambda a: a)
FASTMCP_CONFIG = Route("FastMCP, create_proxy(MCPConfig)", "echo_echo", lambda a: a, one_caller_only=True)
BASE_CORE = Route("baseline checkout, core tool", "echo__echo", lambda a: a)
BASE_BRIDGE = Route("baseline checkout, tool_call", "tool_call", BRIDGE.wrap)
ROUTES = {"direct": DIRECT, "relay": RELAY, "core": CORE, "tool_call": BRIDGE, "fastmcp_mount": FASTMCP_MOUNT,
          "fastmcp_config": FASTMCP_CONFIG}


@dataclass(frozen=True)
class Target:
    """A server to measure: how to open a client session to it, whether callers share one session
    (stdio) or each open their own (HTTP), and the routes it serves."""

    open_client: Callable[[], contextlib.AbstractAsyncContextManager[Client]]
    shared_session: bool
    routes: tuple[Route, ...]
    pid: int | None = None  # the server process, when started here (else the stdio client spawns it)


# --- fleets and servers --------------------------------------------------------------------------


def _upstream_specs(urls: dict[str, str] | None) -> dict[str, dict[str, Any]]:
    """Each upstream as a stdio command or, over HTTP, its URL."""
    if urls is not None:
        return {name: {"url": urls[name]} for name in SERVERS}
    return {name: {"command": UPSTREAM[0], "args": [*UPSTREAM[1:], "--name", name], "cwd": str(REPO)}
            for name in SERVERS}


def _toolbridge_config(directory: Path, urls: dict[str, str] | None) -> Path:
    (directory / "upstreams").mkdir(parents=True)
    for name, spec in _upstream_specs(urls).items():
        (directory / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    core = [f"{name}__echo" for name in SERVERS]  # echo_deferred stays behind tool_call
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({"core": core, "startup_wait": 60}))
    return directory


def _fastmcp_config(path: Path, urls: dict[str, str] | None) -> Path:
    servers = _upstream_specs(urls)
    if urls is not None:
        servers = {name: {**spec, "transport": "http"} for name, spec in servers.items()}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _stdio_target(command: list[str], routes: tuple[Route, ...], cwd: Path = REPO) -> Target:
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(cwd))
    return Target(lambda: Client(stdio_client(params)), True, routes)


def _http_target(url: str, routes: tuple[Route, ...], pid: int) -> Target:
    @contextlib.asynccontextmanager
    async def open_client() -> AsyncIterator[Client]:
        async with (httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
                    Client(streamable_http_client(url, http_client=http)) as client):
            yield client

    return Target(open_client, False, routes, pid)


@contextlib.asynccontextmanager
async def _http_server(command: list[str], log: Path, probe: str, cwd: Path = REPO) -> AsyncIterator[int]:
    with started_server(command, log, cwd) as process:
        await wait_http(probe)
        yield process.pid


# --- measuring -----------------------------------------------------------------------------------


@dataclass
class Cell:
    """One route at one concurrency, measured a slice at a time so that every cell sees the same
    machine: the box is shared, and a neighbour's burst then lands on all cells alike."""

    route: Route
    callers: int
    clients: list[Client]
    pid: int
    samples: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0  # of the server process, while this cell's calls ran

    @property
    def cpu_ms_per_call(self) -> float:
        return self.cpu_s * 1000 / len(self.samples)

    async def run_slice(self, seconds: float) -> None:
        """`callers` concurrent loops until `seconds` have passed, each calling at least once."""

        async def loop(client: Client, deadline: float) -> None:
            index = 0
            while True:
                started = time.perf_counter()
                await client.call_tool(self.route.tool, self.route.wrap({"value": index}))
                self.samples.append((time.perf_counter() - started) * 1000)
                index += 1
                if time.perf_counter() >= deadline:
                    return

        started, cpu = time.perf_counter(), cpu_seconds(self.pid)
        async with anyio.create_task_group() as tg:
            for index in range(self.callers):
                tg.start_soon(loop, self.clients[index % len(self.clients)], started + seconds)
        self.wall_s += time.perf_counter() - started
        self.cpu_s += cpu_seconds(self.pid) - cpu


async def _open_cells(stack: contextlib.AsyncExitStack, targets: list[Target], callers: list[int],
                      all_cells: bool) -> tuple[list[Cell], list[tuple[Route, int, str]]]:
    """Every measurable cell with its sessions open, listed and warmed up, and the skipped ones."""
    cells, skipped = [], []
    for target in targets:
        sessions = 1 if target.shared_session else max(callers)
        before = child_pids()
        clients = [await stack.enter_async_context(target.open_client()) for _ in range(sessions)]
        spawned = child_pids() - before  # the stdio server the client started
        pid = target.pid if target.pid is not None else spawned.pop() if len(spawned) == 1 else -1
        assert pid > 0, f"cannot tell the server process among {spawned}"
        for client in clients:
            await client.list_tools()  # else the first call lists implicitly, inside the timing
        for route in target.routes:
            warm_until = time.perf_counter() + WARM_UP_S
            while time.perf_counter() < warm_until:
                await clients[0].call_tool(route.tool, route.wrap({"value": 0}))
            for count in callers:
                if route.one_caller_only and count > 1 and not all_cells:
                    skipped.append((route, count, "skipped: reconnects every upstream per request (--all-cells)"))
                else:
                    cells.append(Cell(route, count, clients[:count], pid))
    return cells, skipped


async def _targets(transport: str, temp: Path, stack: contextlib.AsyncExitStack, routes: set[Route],
                   baseline: Path | None) -> list[Target]:
    """Start what the transport needs for `routes` and return their targets, direct first."""
    every = await _every_target(transport, temp, stack, routes, baseline)
    chosen = [replace(target, routes=tuple(r for r in target.routes if r in routes)) for target in every]
    return [target for target in chosen if target.routes]


async def _every_target(transport: str, temp: Path, stack: contextlib.AsyncExitStack,
                        routes: set[Route], baseline: Path | None) -> list[Target]:
    log = temp / "servers.log"
    toolbridge_dir = temp / "toolbridge"
    fastmcp_json = temp / "fastmcp.json"
    if transport == "stdio":
        _toolbridge_config(toolbridge_dir, None)
        _fastmcp_config(fastmcp_json, None)
        targets = [_stdio_target([*UPSTREAM, "--name", "echo"], (DIRECT,)),
                   _stdio_target([*RELAY_COMMAND, "--command", *UPSTREAM, "--name", "echo"], (RELAY,)),
                   _stdio_target(toolbridge_command(toolbridge_dir), (CORE, BRIDGE))]
        if baseline is not None:
            targets.append(_stdio_target(toolbridge_command(toolbridge_dir), (BASE_CORE, BASE_BRIDGE), baseline))
        if FASTMCP_PYTHON.exists():
            fastmcp = [str(FASTMCP_PYTHON), "bench/fastmcp_proxy.py", str(fastmcp_json)]
            targets += [_stdio_target([*fastmcp, "--mode", "mount"], (FASTMCP_MOUNT,)),
                        _stdio_target([*fastmcp, "--mode", "config"], (FASTMCP_CONFIG,))]
        return targets
    ports = {name: free_port() for name in SERVERS}
    urls = {name: f"http://127.0.0.1:{port}/mcp" for name, port in ports.items()}
    pids = {}
    for name, port in ports.items():
        pids[name] = await stack.enter_async_context(_http_server(
            [*UPSTREAM, "--name", name, "--http", str(port)], log, f"http://127.0.0.1:{port}/"))
    _toolbridge_config(toolbridge_dir, urls)
    _fastmcp_config(fastmcp_json, urls)
    targets = [_http_target(urls["echo"], (DIRECT,), pids["echo"])]
    if RELAY in routes:
        relay_port = free_port()
        relay = await stack.enter_async_context(_http_server(
            [*RELAY_COMMAND, "--http", str(relay_port), "--url", urls["echo"]], log,
            f"http://127.0.0.1:{relay_port}/"))
        targets.append(_http_target(f"http://127.0.0.1:{relay_port}/mcp", (RELAY,), relay))
    if routes & {CORE, BRIDGE}:
        port = free_port()
        toolbridge = await stack.enter_async_context(_http_server(
            toolbridge_command(toolbridge_dir, "--transport", "http", "--port", str(port)), log,
            f"http://127.0.0.1:{port}/healthz"))
        targets.append(_http_target(f"http://127.0.0.1:{port}/mcp", (CORE, BRIDGE), toolbridge))
    if baseline is not None:
        port = free_port()
        base = await stack.enter_async_context(_http_server(
            toolbridge_command(toolbridge_dir, "--transport", "http", "--port", str(port)), log,
            f"http://127.0.0.1:{port}/healthz", baseline))
        targets.append(_http_target(f"http://127.0.0.1:{port}/mcp", (BASE_CORE, BASE_BRIDGE), base))
    if FASTMCP_PYTHON.exists():
        for mode, route in (("mount", FASTMCP_MOUNT), ("config", FASTMCP_CONFIG)):
            if route not in routes:
                continue
            port = free_port()
            fastmcp = await stack.enter_async_context(_http_server(
                [str(FASTMCP_PYTHON), "bench/fastmcp_proxy.py", str(fastmcp_json), "--mode", mode,
                 "--http", str(port)], log, f"http://127.0.0.1:{port}/"))
            targets.append(_http_target(f"http://127.0.0.1:{port}/mcp", (route,), fastmcp))
    return targets


def _print_table(transport: str, rows: list[tuple[Route, int, Cell | str]]) -> None:
    print(f"\n{transport}: {'route':<34} {'callers':>7} {'calls':>6} {'median ms':>10} {'p99 ms':>8} "
          f"{'calls/s':>8} {'median/direct':>14} {'calls/s / direct':>17} {'server CPU ms/call':>19}")
    direct = {callers: result for route, callers, result in rows if route is DIRECT}
    for route, callers, cell in rows:
        if isinstance(cell, str):
            print(f"{'':<{len(transport) + 2}}{route.label:<34} {callers:>7} {cell}")
            continue
        result, reference = Latency(cell.samples, cell.wall_s), direct.get(callers)
        ratio = rate_ratio = ""
        if isinstance(reference, Cell):
            ratio = f"{result.median / Latency(reference.samples, reference.wall_s).median:.2f}x"
            rate_ratio = f"{result.rate / Latency(reference.samples, reference.wall_s).rate:.2f}x"
        print(f"{'':<{len(transport) + 2}}{route.label:<34} {callers:>7} {len(result.samples):>6} "
              f"{result.median:>10.2f} {result.p99:>8.2f} {result.rate:>8.0f} {ratio:>14} {rate_ratio:>17} "
              f"{cell.cpu_ms_per_call:>19.3f}")


async def main(transports: list[str], callers: list[int], seconds: float, rounds: int, all_cells: bool,
               routes: set[Route], baseline: Path | None) -> None:
    print(__doc__.splitlines()[0])
    print(machine_summary())
    if not FASTMCP_PYTHON.exists():
        print(f"FastMCP skipped: {FASTMCP_PYTHON} is missing (run bench/setup.sh)")
    for transport in transports:
        with tempfile.TemporaryDirectory() as temp:
            async with contextlib.AsyncExitStack() as stack:
                targets = await _targets(transport, Path(temp), stack, routes, baseline)
                cells, skipped = await _open_cells(stack, targets, callers, all_cells)
                shuffle = random.Random(0)
                for round_ in range(rounds):
                    with anyio.fail_after(CELL_TIMEOUT):
                        for count in callers:  # a heavy 32-caller slice never runs just before a 1-caller one
                            group = [cell for cell in cells if cell.callers == count]
                            for cell in shuffle.sample(group, len(group)):
                                await cell.run_slice(seconds / rounds)
                    print(f"  {transport}: round {round_ + 1}/{rounds} done", file=sys.stderr)
        rows: list[tuple[Route, int, Cell | str]] = [(cell.route, cell.callers, cell) for cell in cells]
        _print_table(transport, rows + skipped)
    print(f"\neach cell: {seconds:g} s of calls in {rounds} slices, cells interleaved in shuffled order; "
          "ratios: median latency and calls/s of each route over the direct call, same transport and callers; "
          "server CPU: of the process the client talks to (the upstream for the direct call), not its children")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per cell")
    parser.add_argument("--rounds", type=int, default=5, help="slices each cell's time is cut into")
    parser.add_argument("--callers", default="1,32", help="concurrent callers, comma-separated")
    parser.add_argument("--transports", default="stdio,http", help="stdio, http or both")
    parser.add_argument("--all-cells", action="store_true", help="also FastMCP create_proxy(MCPConfig) with >1 caller")
    parser.add_argument("--routes", default=",".join(ROUTES),
                        help=f"comma-separated subset of {', '.join(ROUTES)} (the direct call is always measured)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="also toolbridge from another checkout of it (e.g. `git archive main`), side by side")
    options = parser.parse_args()
    chosen = {ROUTES[key] for key in options.routes.split(",")} | {DIRECT}
    if options.baseline is not None:
        chosen |= {BASE_CORE, BASE_BRIDGE}
    anyio.run(main, options.transports.split(","), [int(c) for c in options.callers.split(",")], options.seconds,
              options.rounds, options.all_cells, chosen, options.baseline)
