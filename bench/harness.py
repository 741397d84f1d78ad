"""What every side-by-side benchmark needs: the machine it ran on, latency statistics, and server
processes it starts, waits for and stops itself.

Servers under test are driven only through their command lines and MCP, so nothing here imports
`proxy`: a restructure of the package cannot break the benchmarks.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2

__all__ = [
    "BENCH_VENV",
    "FASTMCP_PYTHON",
    "REPO",
    "Latency",
    "child_pids",
    "cpu_seconds",
    "free_port",
    "machine_summary",
    "started_server",
    "toolbridge_command",
    "wait_http",
]

REPO = Path(__file__).resolve().parent.parent
BENCH_VENV = REPO / ".bench-venv"
FASTMCP_PYTHON = BENCH_VENV / "fastmcp" / "bin" / "python"


def machine_summary() -> str:
    """One line naming the CPU, cores, memory and software, for every report."""
    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = ""
    with contextlib.suppress(OSError), open("/proc/meminfo") as meminfo:
        kib = int(meminfo.readline().split()[1])
        memory = f", {kib / 2**20:.0f} GiB RAM"
    load = ", load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    return (f"machine: {model}, {os.cpu_count()} cores{memory}{load}; "
            f"Python {platform.python_version()}, {platform.system()} {platform.release()}")


def toolbridge_command(config_dir: Path, *extra: str, stamp: Path | None = None) -> list[str]:
    """`toolbridge serve` from this checkout (not the console script, which may point elsewhere).

    `stamp`: started through `bench/stamped.py`, which notes there when its imports were done.
    """
    launcher = ["-m", "bench.stamped", str(stamp)] if stamp is not None else ["-m", "proxy"]
    return [sys.executable, *launcher, "serve", "--config-dir", str(config_dir), "--log-level", "warning", *extra]


@dataclass(frozen=True)
class Latency:
    """Per-call latencies (ms) of one run and its wall time (s)."""

    samples: list[float]
    wall_s: float

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p99(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]

    @property
    def rate(self) -> float:
        return len(self.samples) / self.wall_s


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process (all its threads, not its children) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int | None = None) -> set[int]:
    """The running processes whose parent is `pid` (default: this process)."""
    parent = str(os.getpid() if pid is None else pid)
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            text = stat.read_text()
            if text[text.rindex(")") + 2:].split()[1] == parent:
                found.add(int(stat.parent.name))
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def wait_http(url: str, timeout: float = 60.0, interval: float = 0.05) -> None:
    """Wait until something answers HTTP at `url` (any status), trying every `interval` seconds.

    Raises:
        TimeoutError: nothing answered within `timeout` seconds.
    """
    with anyio.fail_after(timeout):
        async with httpx2.AsyncClient(timeout=2) as http:
            while True:
                try:
                    await http.get(url)
                    return
                except httpx2.TransportError:
                    await anyio.sleep(interval)


@contextlib.contextmanager
def started_server(command: list[str], log: Path, cwd: Path = REPO) -> Iterator[subprocess.Popen[bytes]]:
    """A server process in its own process group; the whole group is ended on exit."""
    with open(log, "ab") as errlog:
        process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=errlog, stderr=errlog,
                                   start_new_session=True)
    try:
        yield process
    finally:
        for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
