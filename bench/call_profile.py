"""Where a proxy's CPU goes on one tool call: N calls over stdio through a profiled server process.

The server (toolbridge, or the bare SDK relay for comparison) runs under `bench/profiled.py`
(cProfile, switched on by signal); this client lists once, warms up, profiles `--calls` calls and
prints the functions that took the most time in the server. cProfile slows small functions down more than big ones,
so read it for where the time goes, not for how much; `bench.overhead` measures how much.
Run: `.venv/bin/python -m bench.call_profile [--target core|tool_call|relay] [--calls 3000] [--top 40]`.
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import signal
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters, stdio_client

from bench.harness import REPO, child_pids
from bench.overhead import BRIDGE, CORE, RELAY, UPSTREAM, Route, _toolbridge_config

WARM_UP_CALLS = 200


async def main(target: str, calls: int, top: int, sort: str, callers: list[str], save: str | None) -> None:
    with tempfile.TemporaryDirectory() as temp:
        stats_file = Path(save) if save else Path(temp) / "server.prof"
        launcher = [sys.executable, "-m", "bench.profiled", str(stats_file)]
        route: Route
        if target == "relay":
            command = [*launcher, "bench.relay", "--command", *UPSTREAM, "--name", "echo"]
            route = RELAY
        else:
            config_dir = _toolbridge_config(Path(temp) / "toolbridge", None)
            command = [*launcher, "proxy", "serve", "--config-dir", str(config_dir), "--log-level", "warning"]
            route = CORE if target == "core" else BRIDGE
        params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO))
        with anyio.fail_after(600):
            before = child_pids()
            async with Client(stdio_client(params)) as client:
                (pid,) = child_pids() - before
                await client.list_tools()
                for index in range(WARM_UP_CALLS):
                    await client.call_tool(route.tool, route.wrap({"value": index}))
                os.kill(pid, signal.SIGUSR1)
                for index in range(calls):
                    await client.call_tool(route.tool, route.wrap({"value": index}))
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
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumulative, ...)")
    parser.add_argument("--save", help="keep the raw stats in this file")
    parser.add_argument("--callers", action="append", default=[], help="also print who calls functions matching this")
    options = parser.parse_args()
    anyio.run(main, options.target, options.calls, options.top, options.sort, options.callers, options.save)
