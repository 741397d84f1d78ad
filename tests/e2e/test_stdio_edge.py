"""The stdio transport's edges, through a real `toolbridge serve` subprocess: signals, raw frames, secrets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from fleetdir import REPO, write_fleet
from test_lifecycle import processes_mentioning

pytestmark = pytest.mark.anyio


async def test_sigterm_exits_while_the_client_keeps_stdin_open(tmp_path: Path) -> None:
    marker = f"stdinopen{os.getpid()}"
    config = write_fleet(tmp_path, {"one": ["--prefix", marker], "two": ["--prefix", marker]})
    process = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--config-dir", str(config)], cwd=REPO,
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(20):
            while len(processes_mentioning(marker)) < 2:
                await anyio.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        returncode = process.wait(timeout=20)  # stdin stays open: the client has not gone away
        elapsed = time.monotonic() - started
        stderr = process.stderr.read().decode() if process.stderr else ""
    finally:
        process.kill()
        for pipe in (process.stdin, process.stderr):
            if pipe:
                pipe.close()
    assert returncode == 0, stderr[-2000:]
    assert elapsed < 10
    assert processes_mentioning(marker) == []
