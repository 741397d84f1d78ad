"""Where a proxy's CPU goes on one tool call: N calls through a profiled server process.

The server (toolbridge, or the bare SDK relay for comparison) runs under `bench/profiled.py`
(cProfile, switched on by signal); this client lists once, warms up, profiles `--calls` calls and
prints the functions that took the most time in the server. cProfile slows small functions down more than big ones,
so read it for where the time goes, not for how much; `bench.overhead` measures how much.
Run: `.venv/bin/python -m bench.call_profile [--target core|tool_call|relay] [--transport stdio|http]
[--calls 3000] [--top 40]`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pstats
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx2
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from bench.harness import REPO, child_pids, free_port
from bench.overhead import BRIDGE, CORE, RELAY, SERVERS, UPSTREAM, _http_server, _toolbridge_config

WARM_UP_CALLS = 200


@contextlib.asynccontextmanager
async def _served(target: str, transport: str, temp: Path, stats_file: Path,
                  stack: contextlib.AsyncExitStack) -> AsyncIterator[tuple[Client, int]]:
    """A client of the profiled server, and the server's pid."""
    launcher = [sys.executable, "-m", "bench.profiled", str(stats_file)]
    urls = None
    if transport == "http":
        urls = {}
        for name in SERVERS:
            port = free_port()
            await stack.enter_async_context(_http_server(
                [*UPSTREAM, "--name", name, "--http", str(port)], temp / "servers.log", f"http://127.0.0.1:{port}/"))
            urls[name] = f"http://127.0.0.1:{port}/mcp"
    if target == "relay":
        upstream = ["--url", urls["echo"]] if urls else ["--command", *UPSTREAM, "--name", "echo"]
        command = [*launcher, "bench.relay", *upstream]
    else:
        config_dir = _toolbridge_config(temp / "toolbridge", urls)
        command = [*launcher, "proxy", "serve", "--config-dir", str(config_dir), "--log-level", "warning"]
    if transport == "stdio":
        params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO))
        before = child_pids()
        client = await stack.enter_async_context(Client(stdio_client(params)))
        (pid,) = child_pids() - before
        yield client, pid
        return
    port = free_port()
    extra = ["--http", str(port)] if target == "relay" else ["--transport", "http", "--port", str(port)]
    probe = f"http://127.0.0.1:{port}/" + ("" if target == "relay" else "healthz")
    pid = await stack.enter_async_context(_http_server([*command, *extra], temp / "servers.log", probe))
    http = await stack.enter_async_context(httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)))
    url = f"http://127.0.0.1:{port}/mcp"
    yield await stack.enter_async_context(Client(streamable_http_client(url, http_client=http))), pid


async def main(target: str, transport: str, calls: int, top: int, sort: str, callers: list[str],
               save: str | None) -> None:
    route = {"relay": RELAY, "core": CORE, "tool_call": BRIDGE}[target]
    with tempfile.TemporaryDirectory() as temp:
        stats_file = Path(save) if save else Path(temp) / "server.prof"
        with anyio.fail_after(600):
            async with contextlib.AsyncExitStack() as stack, \
                    _served(target, transport, Path(temp), stats_file, stack) as (client, pid):
                await client.list_tools()
                for index in range(WARM_UP_CALLS):
                    await client.call_tool(route.tool, route.wrap({"value": index}))
                os.kill(pid, signal.SIGUSR1)
                for index in range(calls):
                    await client.call_tool(route.tool, route.wrap({"value": index}))
                stats_file.unlink(missing_ok=True)  # a --save file from an earlier run is not this run's
                os.kill(pid, signal.SIGUSR1)
                while not stats_file.exists():
                    await anyio.sleep(0.1)
        out = io.StringIO()
        stats = pstats.Stats(str(stats_file), stream=out)
        total = stats.total_tt  # type: ignore[attr-defined]
        per_call = total * 1000 / calls
        print(f"{target}: {calls} calls profiled, {total:.2f} s in all, {per_call:.3f} ms a call (profiled)")
        stats.sort_stats(sort).print_stats(top)
        for pattern in callers:
            stats.print_callers(pattern)
        print(out.getvalue())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("core", "tool_call", "relay"), default="core")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumulative, ...)")
    parser.add_argument("--save", help="keep the raw stats in this file")
    parser.add_argument("--callers", action="append", default=[], help="also print who calls functions matching this")
    options = parser.parse_args()
    anyio.run(main, options.target, options.transport, options.calls, options.top, options.sort, options.callers,
              options.save)
