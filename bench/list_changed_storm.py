"""A server that changes a tool and announces it with every listing, in a fleet of N tools: the gateway's
CPU time, how often that server is re-listed, and a healthy server's call latency meanwhile.

Side by side in one run: re-listing as soon as a change is announced (`REFRESH_INTERVAL` 0, as before the
rate limit) and as shipped (a burst of three, then at most once a second). After each healthy call the
bench asks for the default profile's view and its search index, as the next downstream request would
(20 calls a second).
Run: .venv/bin/python -m bench.list_changed_storm [--sizes 5000,20000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import types

from bench.harness import REPO, Latency, machine_summary
from proxy.config import ToolSearchSettings, ToolsetsConfig, UpstreamConfig
from proxy.registry import Registry
from proxy.upstream import Fleet, FleetSettings
from proxy.upstream.fleet import _supervisor as supervisor_module
from proxy.views import Views

CONTROLLABLE = str(REPO / "tests" / "servers" / "controllable.py")
CALL_RATE = 20  # healthy calls a second: the gateway's CPU time is then mostly the storm's


def _words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9))) for _ in range(n))


def fleet_of(n_tools: int) -> Registry:
    """A registry holding `n_tools` made-up tools, 500 to a server."""
    rng = random.Random(0)
    registry = Registry()
    servers = {f"srv{s}": [types.Tool(name=f"{'_'.join(_words(rng, 3).split())}_{i}", description=_words(rng, 20),
                                      input_schema={"type": "object", "properties": {"path": {"type": "string"}}})
                           for i in range(500)] for s in range(max(1, n_tools // 500))}
    registry.set_servers_tools({server: (tools, True) for server, tools in servers.items()})
    return registry


async def storm(n_tools: int, interval: float, seconds: float) -> tuple[int, float, Latency]:
    """(re-listings of the storm server, gateway CPU seconds, healthy calls) over `seconds`."""
    supervisor_module.REFRESH_INTERVAL = interval
    registry = fleet_of(n_tools)
    views = Views(registry, ToolsetsConfig(tool_search=ToolSearchSettings(semantic="off")), lambda server: True)
    listings = 0

    def count(server: str, entries: object) -> None:
        nonlocal listings
        listings += server == "storm"

    registry.add_listener(count)
    upstreams = {name: UpstreamConfig(name=name, command=sys.executable, args=(CONTROLLABLE, *flags))
                 for name, flags in (("storm", ("--storm",)), ("calm", ()))}
    with tempfile.TemporaryDirectory() as directory:
        fleet = Fleet(upstreams, registry, FleetSettings(Path(directory), Path(directory) / "logs"))
        async with anyio.create_task_group() as tg:
            await tg.start(fleet.run)
            with anyio.fail_after(30):
                await fleet.ready.wait()
            views.for_profile("default").surface  # noqa: B018 (built once before the clock starts)
            views.index  # noqa: B018
            listings, samples = 0, []
            cpu, started = time.process_time(), time.perf_counter()
            while (sent := time.perf_counter()) - started < seconds:
                await fleet.call_tool("calm", "echo", {"text": "hi"})
                views.for_profile("default").surface  # noqa: B018 (what the next request builds)
                views.index  # noqa: B018
                samples.append((time.perf_counter() - sent) * 1000)
                await anyio.sleep(max(0.0, sent + 1 / CALL_RATE - time.perf_counter()))
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu
            tg.cancel_scope.cancel()
    return listings, cpu, Latency(samples, wall)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,20000", help="fleet sizes in tools, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0)
    options = parser.parse_args()
    print(machine_summary())
    shipped = supervisor_module.REFRESH_INTERVAL
    limited = f"{supervisor_module.REFRESH_BURST}, then 1/{shipped:g} s"
    for size in (int(s) for s in options.sizes.split(",")):
        rows = {label: await storm(size, interval, options.seconds)
                for label, interval in (("at once (before)", 0.0), (limited, shipped))}
        for label, (listings, cpu, calls) in rows.items():
            print(f"{size:>6} tools, re-list {label:17}: {listings / calls.wall_s:6.1f} listings/s, "
                  f"gateway CPU {cpu / calls.wall_s:4.0%} of a core; healthy call + next request "
                  f"p50 {calls.median:6.1f} ms, max {max(calls.samples):6.1f} ms")
        (before, cpu_before, _), (after, cpu_after, _) = rows.values()
        print(f"{size:>6} tools: {before / max(after, 1):.0f}x fewer listings, "
              f"{cpu_before / cpu_after:.1f}x less gateway CPU")
    print(machine_summary())


if __name__ == "__main__":
    anyio.run(main)
