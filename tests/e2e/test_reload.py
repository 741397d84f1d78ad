"""Hot reload on a running `toolbridge serve` (stdio and HTTP): edits apply without a restart,
touch only the servers they concern, and notify only the sessions whose list changed."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port
from fleetdir import REPO, ToolListChanges, serve_http
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from servers.harness import TINY, alive, descendants

pytestmark = pytest.mark.anyio

# Seconds from the edit to the new list: the 2 s (issue 10) is a benchmark gate on a quiet machine
# (`python -m bench.latency_gates --only reload`); here, a bound no neighbour's CPU can break.
APPLIES_WITHIN = 8.0


def upstream(directory: Path, name: str, *flags: str, **settings: Any) -> Path:
    path = directory / "upstreams" / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"command": sys.executable, "args": [TINY, "--pid", *flags], **settings}))
    return path


def config_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "config"
    (directory / "upstreams").mkdir(parents=True)
    upstream(directory, "alpha")
    upstream(directory, "beta")
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({
        "startup_wait": 10,
        "profiles": {"default": {}, "betaonly": {"match": "beta-*", "toolsets": ["beta"]}},
    }))
    return directory


async def names(client: Client) -> set[str]:
    """The deferred tools the session can find. Never `tools/list`: a session that lists is up to date,
    so it is (rightly) not told of the change."""
    result = await client.call_tool("tool_search", {"queries": ["echo pid process"], "limit": 25})
    assert isinstance(result.content[0], types.TextContent)
    return set(json.loads(result.content[0].text)["tools"])


async def pid(client: Client, server: str) -> int:
    result = await client.call_tool("tool_call", {"name": f"{server}__pid", "arguments": {}})
    assert isinstance(result.content[0], types.TextContent), result
    return int(result.content[0].text)


async def until(condition: Callable[[], Any], timeout: float = 10) -> float:
    """Seconds until `condition()` (awaited) holds, polling; fails after `timeout`."""
    started = time.monotonic()
    with anyio.fail_after(timeout):
        while not await condition():
            await anyio.sleep(0.05)
    return time.monotonic() - started


async def exercise_reload(
    directory: Path, client: Client, session: ToolListChanges, other: ToolListChanges | None,
    problem_shown: Callable[[], Awaitable[bool]],
) -> None:
    """`other`, when given, is a session of the same proxy whose profile sees only `beta`: it must hear
    only of beta's changes."""
    assert {"alpha__pid", "beta__pid"} <= await names(client)
    alpha, beta = await pid(client, "alpha"), await pid(client, "beta")
    others = other.changes if other else 0

    upstream(directory, "gamma")  # added: started, its tools listed, sessions told
    took = await until(lambda: has(client, "gamma__pid"), timeout=APPLIES_WITHIN + 2)
    assert took < APPLIES_WITHIN, f"an added upstream took {took:.2f} s to list"
    await until(lambda: more_than(session, 0))
    gamma = await pid(client, "gamma")

    upstream(directory, "beta", connect_timeout=30)  # changed: only beta restarts
    await until(lambda: pid_differs(client, "beta", beta))
    assert await pid(client, "alpha") == alpha and await pid(client, "gamma") == gamma

    (directory / "upstreams" / "alpha.yaml").write_text("command: [unclosed\n")  # broken: the last good stays
    await until(problem_shown)
    assert await pid(client, "alpha") == alpha

    changes = session.changes
    (directory / "upstreams" / "gamma.yaml").unlink()  # removed: process gone, tools gone
    await until(lambda: lacks(client, "gamma__pid"))
    await until(lambda: gone(gamma))
    await until(lambda: more_than(session, changes))

    changes, others = session.changes, other.changes if other else 0
    toolsets = yaml.safe_load((directory / "toolsets.yaml").read_text())
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({**toolsets, "core": ["alpha__echo"]}))
    await until(lambda: more_than(session, changes))  # the surface changed, no upstream restarted
    assert "alpha__echo" in [t.name for t in (await client.list_tools()).tools]
    assert await pid(client, "alpha") == alpha
    if other is not None:
        assert other.changes == others  # its beta-only list did not change


async def has(client: Client, name: str) -> bool:
    return name in await names(client)


async def lacks(client: Client, name: str) -> bool:
    return name not in await names(client)


async def gone(process_id: int) -> bool:
    return not alive(process_id)


async def more_than(session: ToolListChanges, count: int) -> bool:
    return session.changes > count


async def pid_differs(client: Client, server: str, old: int) -> bool:
    result = await client.call_tool("tool_call", {"name": f"{server}__pid", "arguments": {}})
    return not result.is_error and isinstance(result.content[0], types.TextContent) and \
        result.content[0].text != str(old)


async def test_reload_over_stdio(tmp_path: Path) -> None:
    directory = config_dir(tmp_path)
    session = ToolListChanges()
    log = tmp_path / "stderr.log"
    params = StdioServerParameters(command=sys.executable, cwd=str(REPO),
                                   args=["-m", "proxy", "serve", "--config-dir", str(directory)])

    async def problem_logged() -> bool:
        return "alpha.yaml:2: invalid YAML" in log.read_text()

    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", message_handler=session.on_message) \
                as client:
            await client.list_tools()
            await exercise_reload(directory, client, session, None, problem_logged)


async def test_reload_over_http_notifies_only_the_sessions_concerned(tmp_path: Path) -> None:
    directory = config_dir(tmp_path)
    session, other = ToolListChanges(), ToolListChanges()
    async with serve_http(directory, free_port()) as base, httpx2.AsyncClient() as http:
        async def problem_in_status() -> bool:
            report = (await http.get(f"{base}/status")).json()
            return any("alpha.yaml:2: invalid YAML" in problem for problem in report["config_problems"])

        beta_info = types.Implementation(name="beta-agent", version="1")
        async with (
            Client(streamable_http_client(f"{base}/mcp"), mode="legacy", message_handler=session.on_message) as client,
            Client(streamable_http_client(f"{base}/mcp"), mode="legacy", message_handler=other.on_message,
                   client_info=beta_info) as beta_client,
        ):
            await client.list_tools()
            await beta_client.list_tools()
            await exercise_reload(directory, client, session, other, problem_in_status)
        report = (await http.get(f"{base}/status")).json()
        assert [u["server"] for u in report["upstreams"]] == ["alpha", "beta"]
        assert all(u["state"] == "ready" for u in report["upstreams"])


async def test_with_no_watch_sighup_still_reloads(tmp_path: Path) -> None:
    directory = config_dir(tmp_path)
    async with serve_http(directory, free_port(), "--no-watch") as base, httpx2.AsyncClient() as http:
        proxy = next(p for p in descendants() if b"proxy\x00serve" in Path(f"/proc/{p}/cmdline").read_bytes())
        upstream(directory, "gamma")

        async def gamma_listed() -> bool:
            return "gamma" in [u["server"] for u in (await http.get(f"{base}/status")).json()["upstreams"]]

        os.kill(proxy, signal.SIGHUP)
        await until(gamma_listed)
