"""What an operator relies on, on a running `toolbridge serve --transport http`: `/status`,
`/metrics`, the audit log, and the refusal to expose an unauthenticated endpoint."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port
from fleetdir import REPO, serve_http
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families
from servers.harness import CONTROLLABLE, TINY

from proxy.downstream.calls._calls import SHOWN_NAME

pytestmark = pytest.mark.anyio

TOKEN = "tb-operator-token-1234567890"
SECRET = "sk-planted-SECRET-0987654321"


def config_dir(tmp_path: Path, audit_arguments: str = "hash") -> Path:
    directory = tmp_path / "config"
    (directory / "upstreams").mkdir(parents=True)
    (directory / "upstreams" / "ctl.yaml").write_text(yaml.safe_dump(
        {"command": sys.executable, "args": [CONTROLLABLE], "env": {"API_KEY": SECRET}, "connect_timeout": 30}))
    (directory / "upstreams" / "tiny.yaml").write_text(yaml.safe_dump({"command": sys.executable, "args": [TINY]}))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({
        "startup_wait": 20,
        "metrics": {"top_tools": 3},
        "audit": {"path": "audit/calls.jsonl", "arguments": audit_arguments},
        "profiles": {"default": {}, "tinyonly": {"match": "tiny-*", "toolsets": ["tiny"]}},
    }))
    return directory


@asynccontextmanager
async def session(base: str, **options: Any) -> AsyncIterator[Client]:
    """A handshake-era client session with the bearer token."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy", **options) as client,
    ):
        yield client


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text exposition, keyed by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text) for sample in family.samples
    }


def value(scraped: dict[Any, float], name: str, **labels: str) -> float:
    return scraped.get((name, tuple(sorted(labels.items()))), 0.0)


async def tool_call(client: Client, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    return await client.call_tool("tool_call", {"name": name, "arguments": arguments})


def text(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


async def test_metrics_and_status_follow_traffic_and_upstream_state(tmp_path: Path) -> None:
    env = {"TOOLBRIDGE_AUTH_TOKEN": TOKEN}
    async with serve_http(config_dir(tmp_path), free_port(), env=env) as base, httpx2.AsyncClient() as http:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert (await http.get(f"{base}/metrics")).status_code == 401
        assert (await http.get(f"{base}/status")).status_code == 401
        with anyio.fail_after(30):
            while not all(u["state"] == "ready" for u in (await http.get(f"{base}/status", headers=auth)).json()[
                    "upstreams"]):
                await anyio.sleep(0.05)
        before = samples((await http.get(f"{base}/metrics", headers=auth)).text)
        assert value(before, "toolbridge_upstream_up", server="ctl") == 1.0

        async with session(base) as client:
            await client.list_tools()
            await client.call_tool("tool_search", {"queries": ["echo text"]})
            for word in ("one", "two"):
                assert text(await tool_call(client, "ctl__echo", {"text": word})) == word
            assert (await tool_call(client, "ctl__nope", {})).is_error
            assert (await client.call_tool("x" * 100_000, {})).is_error  # a name no tool has is no label
            pid = int(text(await tool_call(client, "ctl__pid", {})))
            await tool_call(client, "tiny__echo", {"text": "4th tool: past top_tools"})
            during = samples((await http.get(f"{base}/metrics", headers=auth)).text)

        after = samples((await http.get(f"{base}/metrics", headers=auth)).text)
        assert value(after, "toolbridge_tool_calls_total", server="ctl", tool="ctl__echo", outcome="ok") == 2
        refused = {"server": "toolbridge", "tool": "unknown", "outcome": "refused"}
        assert value(after, "toolbridge_tool_calls_total", **refused) == 2
        assert value(after, "toolbridge_tool_call_errors_total", server="toolbridge", error="UnknownTool") == 2
        assert {dict(labels).get("tool") for _, labels in after} <= {
            None, "ctl__echo", "ctl__pid", "other", "unknown", "tool_search", "tool_call"}
        assert value(after, "toolbridge_tool_calls_total", server="tiny", tool="other", outcome="ok") == 1
        assert value(after, "toolbridge_search_seconds_count") == 1
        assert value(after, "toolbridge_tool_call_seconds_count", server="ctl", tool="ctl__echo") == 2
        assert value(after, "toolbridge_registry_tools") > 10
        assert value(after, "toolbridge_listing_tokens", profile="default") > 0
        assert value(during, "toolbridge_active_sessions") == 1
        assert value(after, "toolbridge_active_sessions") == 0  # the client ended its session (DELETE)

        os.kill(pid, signal.SIGKILL)  # /status and /metrics show it going down and coming back

        async def ctl_state() -> dict[str, Any]:
            report = (await http.get(f"{base}/status", headers=auth)).json()
            return next(u for u in report["upstreams"] if u["server"] == "ctl")

        with anyio.fail_after(10):
            while (await ctl_state())["state"] == "ready":
                await anyio.sleep(0.02)
        with anyio.fail_after(30):
            while (await ctl_state())["state"] != "ready":
                await anyio.sleep(0.05)
        back = await ctl_state()
        assert back["restarts"] == 1 and back["protocol_version"] and back["transport"] == "stdio"
        assert back["last_error"] and SECRET not in json.dumps(back)
        report = (await http.get(f"{base}/status", headers=auth)).json()
        assert report["profiles"]["default"]["tier"] == "bridge" and report["config_problems"] == []
        final = samples((await http.get(f"{base}/metrics", headers=auth)).text)
        assert value(final, "toolbridge_upstream_restarts_total", server="ctl") == 1


async def test_the_audit_log_records_every_call_and_no_secret(tmp_path: Path) -> None:
    directory = config_dir(tmp_path, audit_arguments="full")
    async with serve_http(directory, free_port(), env={"TOOLBRIDGE_AUTH_TOKEN": TOKEN}) as base:
        made = 0
        for client_name in ("ide-one", "tiny-agent"):
            info = types.Implementation(name=client_name, version="7.1")
            async with session(base, client_info=info) as client:
                await client.list_tools()
                for _ in range(2):
                    await tool_call(client, "tiny__echo", {"text": f"Authorization: Bearer {SECRET}"})
                    made += 1
                await client.call_tool("tool_search", {"queries": [f"token={SECRET}"]})
                made += 1
                await client.call_tool("tool_call", {"name": "y" * 100_000, "arguments": {}})
                made += 1
    log = (directory / "audit" / "calls.jsonl").read_text()
    entries = [json.loads(line) for line in log.splitlines()]
    assert len(entries) == made
    assert SECRET not in log and TOKEN not in log
    assert {e["client"] for e in entries} == {"ide-one", "tiny-agent"}
    assert {e["profile"] for e in entries} == {"default", "tinyonly"}
    assert len({e["session"] for e in entries}) == 2 and all(e["session"] for e in entries)
    echo = next(e for e in entries if e["tool"] == "tiny__echo")
    assert (echo["server"], echo["via"], echo["outcome"], echo["client_version"]) == ("tiny", "tool_call", "ok", "7.1")
    assert echo["duration_ms"] >= 0 and "[REDACTED]" in echo["arguments"]["text"]
    assert oct((directory / "audit" / "calls.jsonl").stat().st_mode & 0o777) == "0o600"
    unknown = next(e for e in entries if e["tool"].startswith("y"))  # a name no tool has, cut to a line's worth
    assert (unknown["tool"], unknown["outcome"]) == ("y" * SHOWN_NAME, "refused")


async def test_arguments_are_only_a_hash_by_default(tmp_path: Path) -> None:
    directory = config_dir(tmp_path)
    env = {"TOOLBRIDGE_AUTH_TOKEN": TOKEN}
    async with serve_http(directory, free_port(), env=env) as base, session(base) as client:
        await tool_call(client, "tiny__echo", {"text": "private words"})
    (entry,) = [json.loads(line) for line in (directory / "audit" / "calls.jsonl").read_text().splitlines()]
    assert entry["arguments"].startswith("sha256:") and "private" not in json.dumps(entry)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_a_public_address_without_a_token_is_refused(tmp_path: Path, host: str) -> None:
    (tmp_path / "upstreams").mkdir()  # a config dir with no upstreams: the refusal is about the address alone
    env = {k: v for k, v in os.environ.items() if k != "TOOLBRIDGE_AUTH_TOKEN"}
    run = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--transport", "http", "--host", host, "--config-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60, env=env, cwd=REPO,
    )
    assert run.returncode != 0 and not run.stdout
    assert f"refusing to serve {host} without a bearer token" in run.stderr and "--insecure-no-auth" in run.stderr


def _one_shot_status(directory: Path, *, terminal: bool) -> tuple[int, str, str]:
    """`toolbridge status` (one-shot), its output read from a pseudo-terminal or from pipes."""
    command = [sys.executable, "-m", "proxy", "status", "--config-dir", str(directory), "--wait", "20"]
    if not terminal:
        run = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO)
        return run.returncode, run.stdout, run.stderr
    primary, secondary = pty.openpty()
    process = subprocess.Popen(command, stdin=secondary, stdout=secondary, stderr=secondary, cwd=REPO,
                               env={**os.environ, "COLUMNS": "200", "TERM": "xterm"})
    os.close(secondary)
    screen = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    os.close(primary)
    return process.wait(timeout=60), screen.decode(errors="replace"), ""


def test_one_shot_status_shows_progress_only_on_a_terminal(tmp_path: Path) -> None:
    directory = tmp_path / "config"
    (directory / "upstreams").mkdir(parents=True)
    (directory / "upstreams" / "slow.yaml").write_text(yaml.safe_dump(
        {"command": sys.executable, "args": [TINY, "--slow-start", "1.5"]}))
    code, out, err = _one_shot_status(directory, terminal=False)
    assert code == 0 and "connecting upstreams" not in err
    assert out.splitlines()[0].split() == ["server", "state", "transport", "protocol", "tools", "restarts",
                                           "connected", "since", "last", "error"]
    assert "\x1b[" not in out and out.splitlines()[1].split()[:2] == ["slow", "ready"]
    code, screen, _ = _one_shot_status(directory, terminal=True)
    assert code == 0 and "connecting upstreams" in screen and "slow" in screen
