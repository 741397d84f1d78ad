"""A healthy upstream's latency through the gateway while another upstream abuses it.

The abusive one is `tests/servers/hostile.py` (a 50 MB description, 200,000 tools, or a schema nested
10,000 deep and re-listed every second; or a burst of 100,000 list_changed notifications); the healthy
one is `tests/servers/tiny.py`. Both are real stdio children; an SDK `Client` talks to the gateway's
downstream server in memory and, 20 times a second, calls the healthy tool, every fifth time also
listing tools and searching (what the issue saw left unanswered). Prints p50/p99/max per abuse.
Run: .venv/bin/python -m bench.hostile_upstreams [--seconds 8] [--only tools,burst] [--json] [--gate 500]
(`--json`: one line per abuse with every sample, what registered and whether the burst was answered; what
`tests/test_hostile_upstreams.py` reads, so each run is in a process of its own. `--gate MS`: exit 1 when an
abuse's p99 reaches MS; the issue's bound of 500 ms is this gate, run on a quiet machine, not a test.)
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from mcp import Client

from bench.harness import REPO, Latency, machine_summary
from proxy.app import Gateway, run_gateway
from proxy.config import Config, ToolsetsConfig, UpstreamConfig
from proxy.downstream import ChangeNotifier, Handlers, build_server
from proxy.upstream.connection._limits import MAX_TOOLS

HOSTILE = str(REPO / "tests" / "servers" / "hostile.py")
TINY = str(REPO / "tests" / "servers" / "tiny.py")
RATE = 20  # healthy operations a second
OP_TIMEOUT = 30.0  # an operation that never answers counts as this long
TAIL = 1.0  # how long the healthy operations go on once the abuse is over (what follows it is measured too)

ABUSES = {  # name → (hostile.py flags, list_changed burst size, hostile tools registered when it is over)
    "none": ((), 0, 2),  # the baseline: the same two servers, no abuse
    "description": (("--description-mb", "50"), 0, 3),
    "tools": (("--tools", "200000"), 0, MAX_TOOLS),
    "deep": (("--deep", "10000", "--relist"), 0, 3),
    "burst": ((), 100_000, 2),
}


@dataclass
class Abused:
    """What one run saw: the healthy operations' latencies and the gateway, for checks after the run."""

    latency: Latency
    registered: set[str]
    burst_done: bool


async def _timed(operation: Callable[[], Awaitable[object]], into: list[float]) -> None:
    sent = time.perf_counter()
    with anyio.move_on_after(OP_TIMEOUT):
        await operation()
    into.append((time.perf_counter() - sent) * 1000)


async def _drive(client: Client, seconds: float, until: Callable[[], bool], tail: float = TAIL) -> Latency:
    """Healthy operations at `RATE` a second for `seconds`, and on until `tail` seconds after `until()` holds."""
    samples: list[float] = []
    started = time.perf_counter()
    round_, held = 0, None
    while (sent := time.perf_counter()) - started < seconds or held is None or sent < held + tail:
        if held is None and until():
            held = sent
        await _timed(lambda: client.call_tool("calm__echo", {"text": "hi"}), samples)
        if round_ % 5 == 0:
            await _timed(client.list_tools, samples)
            await _timed(lambda: client.call_tool("tool_search", {"query": "echo text"}), samples)
        round_ += 1
        await anyio.sleep(max(0.0, sent + 1 / RATE - time.perf_counter()))
    return Latency(samples, time.perf_counter() - started)


async def _burst(gateway: Gateway, count: int, done: list[bool]) -> None:
    await gateway.fleet.call_tool("hostile", "burst", {"count": count})
    done.append(True)


async def abused(
    directory: Path, flags: tuple[str, ...], *, seconds: float, burst: int = 0, registered: int = 0
) -> Abused:
    """Run the gateway with the healthy and the hostile upstream and drive the healthy one for at least
    `seconds`, until the hostile one has `registered` tools and its burst (if any) is answered, and `TAIL` on."""
    upstreams = {"calm": UpstreamConfig(name="calm", command=sys.executable, args=(TINY,)),
                 "hostile": UpstreamConfig(name="hostile", command=sys.executable, args=(HOSTILE, *flags),
                                           connect_timeout=600)}
    config = Config(directory, upstreams, ToolsetsConfig(core=("calm__echo",)))
    done: list[bool] = []
    async with run_gateway(config) as gateway, anyio.create_task_group() as tg:
        notifier = ChangeNotifier(gateway.views)
        await tg.start(notifier.run)
        handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready, startup_wait=0)
        await tg.start(handlers.run)
        awaited = ("calm__echo", "hostile__echo") if burst else ("calm__echo",)
        with anyio.fail_after(60):
            while not all(name in gateway.registry.tools for name in awaited):
                await gateway.registry.wait_for_change(gateway.registry.generation)
        async with Client(build_server(handlers), cache=None) as client:
            await _drive(client, 0, lambda: True, tail=0)  # warm: the first search imports the index's libraries
            if burst:
                tg.start_soon(_burst, gateway, burst, done)
            latency = await _drive(client, seconds, lambda: (not burst or bool(done)) and len(
                gateway.registry.server_tools("hostile")) >= registered)
        names = set(gateway.registry.tools)
        tg.cancel_scope.cancel()
    return Abused(latency, names, bool(done))


async def main(names: list[str], seconds: float, as_json: bool, gate: float | None = None) -> bool:
    """Run each abuse and print its figures; False when a p99 reached `gate` (ms)."""
    met = True
    if not as_json:
        print(__doc__.splitlines()[0])
        print(machine_summary())
        print(f"{'abuse':<12} {'ops':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name in names:
        flags, burst, registered = ABUSES[name]
        with tempfile.TemporaryDirectory() as directory:
            run = await abused(Path(directory), flags, seconds=seconds, burst=burst, registered=registered)
        samples = run.latency.samples
        if as_json:
            print(json.dumps({"abuse": name, "samples": samples, "wall_s": run.latency.wall_s,
                              "registered": sorted(run.registered), "burst_done": run.burst_done}), flush=True)
        else:
            print(f"{name:<12} {len(samples):>5} {run.latency.median:>8.1f} {run.latency.p99:>8.1f} "
                  f"{max(samples):>8.1f}")
        if gate is not None and run.latency.p99 >= gate:
            print(f"{name}: p99 {run.latency.p99:.1f} ms, over the gate of {gate:g} ms", file=sys.stderr)
            met = False
    return met


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--only", default=",".join(ABUSES), help="comma-separated: " + ", ".join(ABUSES))
    parser.add_argument("--json", action="store_true", help="one JSON line per abuse, for tests")
    parser.add_argument("--gate", type=float, metavar="MS", help="exit 1 when an abuse's p99 reaches MS")
    options = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sys.exit(0 if anyio.run(main, options.only.split(","), options.seconds, options.json, options.gate) else 1)
