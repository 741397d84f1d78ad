"""A SIGKILLed `toolbridge serve` leaves no upstream behind: not a hung child, not a grandchild (SPEC §8.1).

Its children lead sessions of their own, so nothing else would ever end them (Claude Code's health
check left a hung upstream running under PID 1).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from fleetdir import CONTROLLABLE, REPO, write_config
from servers.harness import _stat, descendants

pytestmark = pytest.mark.anyio


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def living(pids: set[int]) -> set[int]:
    """Those of `pids` that still run (a zombie has ended; whoever adopted it reaps it)."""
    return {pid for pid in pids if (stat := _stat(pid)) is not None and stat[1] != "Z"}


def upstreams_running(tree: set[int]) -> bool:
    """Both hung upstreams and the grandchild one of them started."""
    lines = [cmdline(pid) for pid in tree]
    return sum("--hang" in line for line in lines) >= 2 and any("time.sleep(600)" in line for line in lines)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_sigkilled_serve_takes_hung_upstreams_and_grandchildren_with_it(tmp_path: Path, transport: str) -> None:
    config = write_config(tmp_path, {
        "hung": {"command": sys.executable, "args": [CONTROLLABLE, "--hang"], "connect_timeout": 600},
        "parent": {"command": sys.executable, "args": [CONTROLLABLE, "--spawn-grandchild", "--hang"],
                   "connect_timeout": 600},
    })
    serve = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--transport", transport, "--port", "0",
                              "--config-dir", str(config)], cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree: set[int] = set()
    try:
        with anyio.fail_after(30):
            while not upstreams_running(tree := descendants(serve.pid)):
                await anyio.sleep(0.05)
        serve.kill()  # SIGKILL: no cleanup of its own runs
        serve.wait()
        with anyio.fail_after(5):
            while living(tree):
                await anyio.sleep(0.05)
    finally:
        serve.kill()
        serve.communicate()  # closes its stdin
        for pid in living(tree):
            os.kill(pid, signal.SIGKILL)
