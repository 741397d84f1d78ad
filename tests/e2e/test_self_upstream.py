"""toolbridge as its own upstream: refused where it is configured, and refused again where it runs.

Each test would start toolbridge inside toolbridge without end on a toolbridge that lacked the guard, so
each bounds its wait and takes the whole tree down by closing the outermost stdin (every level then stops
its children).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from fleetdir import REPO, write_config
from mcp import ClientSession, StdioServerParameters, stdio_client
from servers.harness import descendants

pytestmark = pytest.mark.anyio

SERVE = [sys.executable, "-m", "proxy", "serve"]
SELF_MESSAGE = "runs toolbridge on this same config dir"
REFUSAL = "refusing to serve"


def toolbridge_upstream(config_dir: Path | None = None) -> dict[str, object]:
    """An upstream that runs toolbridge (on `config_dir`, else on its working directory)."""
    args = [*SERVE[1:], *(["--config-dir", str(config_dir)] if config_dir else [])]
    return {"command": sys.executable, "args": args, "env": {"TOOLBRIDGE_LOG_LEVEL": "warning"}}


async def read_until(process: Process, text: str, timeout: float = 30) -> str:
    """The stderr of `process` up to and including the first line holding `text`."""
    assert process.stderr is not None
    seen = ""
    with anyio.fail_after(timeout):
        async for chunk in TextReceiveStream(process.stderr):
            seen += chunk
            if text in seen and seen.endswith("\n"):
                return seen
    raise AssertionError(f"stderr ended without {text!r}:\n{seen}")


async def test_serve_skips_an_upstream_that_is_toolbridge_on_its_own_config_dir(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", {"self": toolbridge_upstream(tmp_path / "config")})
    async with await anyio.open_process([*SERVE, "--config-dir", str(config)], cwd=str(REPO)) as process:
        seen = await read_until(process, SELF_MESSAGE)
        assert descendants(process.pid) == set()
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(30):
            await process.wait()
        assert process.stderr is not None
        seen += "".join([chunk async for chunk in TextReceiveStream(process.stderr)])
    assert seen.count(SELF_MESSAGE) == 1
    command_line = (config / "upstreams" / "self.yaml").read_text().splitlines().index(f"command: {sys.executable}")
    assert f"{config / 'upstreams' / 'self.yaml'}:{command_line + 1}: command: {SELF_MESSAGE}" in seen


async def test_serve_refuses_to_run_under_a_toolbridge_serving_its_config_dir(tmp_path: Path) -> None:
    """A wrapper script hides toolbridge from any reading of the config; the chain in the environment does not."""
    config = tmp_path / "config"
    wrapper = tmp_path / "wrapped.sh"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m proxy serve\n")  # no --config-dir: its cwd, `config`
    wrapper.chmod(0o755)
    write_config(config, {"wrapped": {"command": str(wrapper), "env": {"PYTHONPATH": str(REPO)}}})
    async with await anyio.open_process([*SERVE, "--config-dir", str(config)], cwd=str(REPO)) as process:
        log = config / "logs" / "wrapped.log"
        with anyio.fail_after(30):
            while REFUSAL not in (log.read_text() if log.exists() else ""):
                await anyio.sleep(0.05)
        assert len(descendants(process.pid)) <= 2  # the refused child and its watchdog, while they exit: no chain
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(30):
            await process.wait()
    assert f"refusing to serve {config} inside a toolbridge that already serves it" in log.read_text()


async def test_a_cycle_through_two_config_dirs_stops_where_it_comes_round(tmp_path: Path) -> None:
    """A serves B (allowed: another config dir), B serves A: the second A refuses, and B still serves A."""
    first, second = tmp_path / "a", tmp_path / "b"
    write_config(first, {"b": toolbridge_upstream(second)})
    write_config(second, {"a": toolbridge_upstream(first)})
    done = subprocess.run([*SERVE[:-1], "status", "--config-dir", str(first)], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1] for line in done.stdout.split("\n\n")[0].splitlines()[1:]}
    assert rows == {"b": "ready"}
    assert f"refusing to serve {first} inside a toolbridge that already serves it ({first} -> {second} -> {first}" \
        in (second / "logs" / "a.log").read_text()


async def test_a_toolbridge_serving_another_config_dir_under_toolbridge_is_allowed(tmp_path: Path) -> None:
    other = write_config(tmp_path / "other", {})
    config = write_config(tmp_path / "config", {})
    params = StdioServerParameters(command=sys.executable, args=["-m", "proxy", "serve", "--config-dir", str(config)],
                                   env={"TOOLBRIDGE_SERVING": os.path.realpath(other)}, cwd=str(REPO))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(30):
            assert (await session.initialize()).server_info.name == "toolbridge"
