"""Soak: 16 clients over HTTP and stdio while upstreams are killed at random and tool lists burst.

`toolbridge serve --transport http` serves 12 clients (both protocol eras); 4 more each launch
their own `toolbridge serve` over stdio, as client configs do. Every proxy fronts 3 upstreams of
40 tools. Every 2–5 s (`--kill-every`) one upstream process somewhere is SIGKILLed (the proxy
restarts it); now and then a client makes an upstream add tools with a list_changed each. Every call
is bounded, so a hang is counted, never waited out. At the end: no process may be left, and the HTTP
proxy's RSS slope is reported.

Run: `.venv/bin/python -m bench.soak [--duration SECONDS] [--kill-every LOW HIGH]` (prints a JSON
report; exits 1 unless 99% of calls succeeded with no hang and no process left: the release gate
runs it for 600 s). `tests/test_soak.py` runs a short one in every test run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import yaml
from mcp import Client, StdioServerParameters, stdio_client, types

REPO = Path(__file__).resolve().parent.parent
TINY = str(REPO / "tests" / "servers" / "tiny.py")
SERVERS = ("alpha", "beta", "gamma")
HTTP_CLIENTS = 12
STDIO_CLIENTS = 4
CALL_BOUND = 30.0  # a call unanswered this long is a hang
BURST_EVERY = 40  # one call in this many makes its upstream add tools (list_changed each)
KILL_EVERY = (2.0, 5.0)  # seconds between two upstream kills: uniform in this range


@dataclass
class Report:
    duration: float
    calls: int = 0
    succeeded: int = 0
    hangs: int = 0
    kills: int = 0
    bursts: int = 0
    leaked_processes: int = 0
    rss_start_mib: float = 0.0
    rss_end_mib: float = 0.0
    rss_slope_mib_per_min: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)

    @property
    def success_rate(self) -> float:
        return self.succeeded / self.calls if self.calls else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "success_rate": round(self.success_rate, 5),
                "failures": dict(self.failures.most_common(5))}


def write_config(directory: Path) -> Path:
    (directory / "upstreams").mkdir(parents=True)
    for name in SERVERS:
        spec = {"command": sys.executable, "args": [TINY, "--extra-tools", "38", "--burst-tool"], "connect_timeout": 20}
        (directory / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({"startup_wait": 20}))
    return directory


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def descendants(root: int) -> set[int]:
    found, todo = set(), [root]
    while todo:
        for child in _children(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def slope_per_minute(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) samples, in MiB per minute."""
    if len(samples) < 2:
        return 0.0
    mean_t = sum(t for t, _ in samples) / len(samples)
    mean_v = sum(v for _, v in samples) / len(samples)
    spread = sum((t - mean_t) ** 2 for t, _ in samples)
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in samples) / spread if spread else 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def http_proxy(config_dir: Path) -> AsyncIterator[tuple[int, str]]:
    """`toolbridge serve --transport http`; yields (pid, MCP URL) once healthy."""
    port = free_port()
    command = [sys.executable, "-m", "proxy", "serve", "--transport", "http", "--port", str(port),
               "--config-dir", str(config_dir)]
    env = {**os.environ, "TOOLBRIDGE_LOG_LEVEL": "error"}
    process = await anyio.open_process(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=None)
    try:
        async with httpx2.AsyncClient() as http:
            with anyio.fail_after(60):
                while True:
                    try:
                        if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                            break
                    except httpx2.TransportError:
                        await anyio.sleep(0.1)
        yield process.pid, f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        with anyio.move_on_after(15, shield=True):
            await process.wait()
        if process.returncode is None:
            process.kill()


def stdio_proxy(config_dir: Path) -> Any:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "proxy", "serve", "--config-dir", str(config_dir)],
        env={"TOOLBRIDGE_LOG_LEVEL": "error"}, cwd=str(REPO),
    )
    return stdio_client(params, errlog=sys.stderr)


async def one_call(client: Client, report: Report, rng: random.Random) -> None:
    server = rng.choice(SERVERS)
    burst = rng.randrange(BURST_EVERY) == 0
    token = f"t{rng.randrange(10**9)}"
    name, arguments = ("burst", {"count": 3}) if burst else ("echo", {"text": token})
    report.calls += 1
    report.bursts += burst
    with anyio.move_on_after(CALL_BOUND) as bound:
        result = await client.call_tool("tool_call", {"name": f"{server}__{name}", "arguments": arguments})
    if bound.cancelled_caught:
        report.hangs += 1
        return
    block = result.content[0] if result.content else None
    text = block.text if isinstance(block, types.TextContent) else ""
    if result.is_error or text != ("ok" if burst else token):
        report.failures[text[:160]] += 1
    else:
        report.succeeded += 1


async def run_client(client: Client, deadline: float, report: Report, seed: int) -> None:
    rng = random.Random(seed)
    await client.list_tools()
    while time.monotonic() < deadline:
        await one_call(client, report, rng)


async def killer(proxies: list[int], deadline: float, report: Report, rng: random.Random,
                 every: tuple[float, float] = KILL_EVERY) -> None:
    """SIGKILL one upstream process of a random proxy every `every` (low, high) seconds."""
    while time.monotonic() < deadline:
        await anyio.sleep(rng.uniform(*every))
        upstreams = _children(rng.choice(proxies))
        if upstreams:
            os.kill(rng.choice(upstreams), signal.SIGKILL)
            report.kills += 1


async def sample_rss(pid: int, deadline: float, samples: list[tuple[float, float]]) -> None:
    started = time.monotonic()
    while time.monotonic() < deadline:
        samples.append((time.monotonic() - started, rss_mib(pid)))
        await anyio.sleep(1)


async def soak(duration: float, seed: int = 0, kill_every: tuple[float, float] = KILL_EVERY) -> Report:
    report = Report(duration)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as temp:
        config_dir = write_config(Path(temp))
        samples: list[tuple[float, float]] = []
        async with AsyncExitStack() as stack:
            http_pid, url = await stack.enter_async_context(http_proxy(config_dir))
            clients = []
            for index in range(HTTP_CLIENTS):
                mode = "legacy" if index % 2 else "auto"
                clients.append(await stack.enter_async_context(Client(url, mode=mode)))
            for index in range(STDIO_CLIENTS):
                mode = "legacy" if index % 2 else "auto"
                clients.append(await stack.enter_async_context(Client(stdio_proxy(config_dir), mode=mode)))
            proxies = [http_pid, *(pid for pid in _children(os.getpid()) if pid != http_pid)]
            deadline = time.monotonic() + duration
            async with anyio.create_task_group() as tg:
                tg.start_soon(killer, proxies, deadline, report, rng, kill_every)
                tg.start_soon(sample_rss, http_pid, deadline, samples)
                for index, client in enumerate(clients):
                    tg.start_soon(run_client, client, deadline, report, seed * 100 + index)
        with anyio.move_on_after(15):
            while descendants(os.getpid()):
                await anyio.sleep(0.1)
        report.leaked_processes = len(descendants(os.getpid()))
    if samples:
        report.rss_start_mib, report.rss_end_mib = round(samples[0][1], 1), round(samples[-1][1], 1)
        report.rss_slope_mib_per_min = round(slope_per_minute(samples[len(samples) // 4:]), 3)  # after warm-up
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kill-every", type=float, nargs=2, default=KILL_EVERY, metavar=("LOW", "HIGH"),
                        help="seconds between two upstream kills, uniform in [LOW, HIGH] (default 2 5)")
    options = parser.parse_args()
    report = anyio.run(soak, options.duration, options.seed, tuple(options.kill_every))
    print(json.dumps(report.as_dict(), indent=2))
    sys.exit(0 if report.success_rate >= 0.99 and not report.hangs and not report.leaked_processes else 1)


if __name__ == "__main__":
    main()
