"""`toolbridge serve` over a fleet of lazy upstreams whose catalogs are cached: listed, and none started."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest
import yaml
from fleetdir import serve_stdio
from mcp import Client, types
from servers.harness import TINY, descendants

pytestmark = pytest.mark.anyio

SERVERS = [f"s{index:02d}" for index in range(12)]


def fleet_dir(directory: Path) -> Path:
    """Twelve tiny stdio upstreams (tools `echo` and `pid`), every one deferred behind the bridge."""
    (directory / "upstreams").mkdir(parents=True)
    for name in SERVERS:
        spec = {"command": sys.executable, "args": [TINY, "--pid"], "connect_timeout": 20}
        (directory / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({"core": [], "startup_wait": 20}))
    return directory


def serve_pid() -> int:
    """The pid of the one `toolbridge serve` this test process runs."""
    found = [pid for pid in descendants()
             if re.search(rb"-m\x00proxy\x00serve\x00", Path(f"/proc/{pid}/cmdline").read_bytes())]
    assert len(found) == 1, found
    return found[0]


def deferred_count(listed: types.ListToolsResult) -> int:
    search = next(tool for tool in listed.tools if tool.name == "tool_search")
    found = re.search(r"Search (\d+) deferred", search.description or "")
    assert found is not None
    return int(found.group(1))


async def test_a_warm_lazy_fleet_is_listed_with_no_child_running_and_a_call_starts_only_its_server(
    tmp_path: Path,
) -> None:
    config = fleet_dir(tmp_path / "config")
    with anyio.fail_after(60):
        async with Client(serve_stdio(config)) as client:  # cold: every server starts, its catalog is cached
            assert deferred_count(await client.list_tools()) == 2 * len(SERVERS)
        assert len(list((config / ".cache" / "catalogs").glob("*.json"))) == len(SERVERS)

    (config / "toolsets.yaml").write_text(yaml.safe_dump({"core": [], "startup_wait": 20, "lazy": True}))
    with anyio.fail_after(60):
        async with Client(serve_stdio(config)) as client:
            listed = await client.list_tools()
            proxy = serve_pid()
            assert descendants(proxy) == set()
            assert deferred_count(listed) == 2 * len(SERVERS)

            result = await client.call_tool("tool_call", {"name": "s07__pid", "arguments": {}})
            assert not result.is_error and isinstance(result.content[0], types.TextContent)
            server = int(json.loads(result.content[0].text))
            started = descendants(proxy)  # the server, and its watchdog in the server's process group
            assert server in started and {os.getpgid(pid) for pid in started} == {server}
