"""Startup, late servers, shutdown and the bundled default fleet, through real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import free_port
from fleetdir import REPO, connected, serve_stdio, write_fleet
from mcp import Client, types

pytestmark = pytest.mark.anyio


def processes_mentioning(text: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z" and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_late_servers_are_announced_after_startup_wait(tmp_path: Path, mode: str, transport: str) -> None:
    config = write_fleet(tmp_path, {"quick": ["--tools", "2", "--prefix", "quick"],
                                    "late": ["--tools", "2", "--prefix", "late", "--slow-start", "10"]},
                         {"startup_wait": 8, "tool_search": {"enabled": "off"}})
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connected(config, transport, mode, on_message) as client:
        first = [t.name for t in (await client.list_tools()).tools]
        # Neither initialize nor the first list waited for the late server (it needs 10 s, the wait is 8 s);
        # judged by what was listed, not by a clock, so a loaded machine cannot fail it.
        assert first == ["quick__quick_0000", "quick__quick_0001"]
        async with anyio.create_task_group() as tg:
            if mode != "legacy":
                async def listen() -> None:
                    async with client.listen(tools_list_changed=True) as stream:
                        async for _ in stream:
                            changed.set()
                tg.start_soon(listen)
            with anyio.fail_after(30):
                await changed.wait()
            tg.cancel_scope.cancel()
        later = [t.name for t in (await client.list_tools()).tools]
        assert later == ["late__late_0000", "late__late_0001", *first]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_sigterm_stops_cleanly_and_leaves_no_children(tmp_path: Path, transport: str) -> None:
    marker = f"sigterm{os.getpid()}{transport}"
    config = write_fleet(tmp_path, {"one": ["--prefix", marker], "two": ["--prefix", marker]})
    command = [sys.executable, "-m", "proxy", "serve", "--transport", transport, "--port", str(free_port()),
               "--config-dir", str(config)]
    process = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(20):
            while len(processes_mentioning(marker)) < 2:
                await anyio.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0, stderr.decode()[-2000:]
    assert processes_mentioning(marker) == []


BUNDLED = ("filesystem", "git", "memory")


@pytest.mark.skipif(shutil.which("mcp-server-time", path=str(Path(sys.executable).parent)) is None,
                    reason="the bundled fleet is not installed (run scripts/setup.sh)")
async def test_serve_in_the_repository_root_serves_the_bundled_fleet() -> None:
    async with Client(serve_stdio(REPO), mode="legacy") as client:
        with anyio.fail_after(60):  # the first list waits startup_wait (3 s): a loaded machine starts slower
            while True:
                tools = (await client.list_tools()).tools
                names = [t.name for t in tools]
                listing = next((t.description or "" for t in tools if t.name == "tool_search"), "")
                if "time__get_current_time" in names and all(f"\n{s} tools (" in listing for s in BUNDLED):
                    break
                await anyio.sleep(0.2)
        assert names[:1] == ["time__get_current_time"] and "tool_search" in names
        listing = next(t for t in tools if t.name == "tool_search").description or ""
        for server in BUNDLED:
            assert f"\n{server} tools (" in listing
        now = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert not now.is_error and "UTC" in json.dumps(now.model_dump(mode="json"))
