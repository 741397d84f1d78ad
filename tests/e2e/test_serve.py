"""`toolbridge serve` as a subprocess, over stdio and HTTP, driven by the real SDK client."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port
from fleetdir import REPO, calls, serve_http, serve_stdio, wire, write_fleet
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
TOOLSETS = {
    "core": ["alpha__alpha_0000"],
    "profiles": {"default": {"toolsets": ["all"]}, "betaonly": {"match": "beta-*", "toolsets": ["beta"]}},
    "startup_wait": 15,
}


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    log = tmp_path / "calls.jsonl"
    servers = {
        "alpha": ["--tools", "3", "--prefix", "alpha", "--calls-log", str(log)],
        "beta": ["--tools", "4", "--prefix", "beta", "--calls-log", str(log)],
    }
    return write_fleet(tmp_path / "config", servers, TOOLSETS)


def payload(result: types.CallToolResult) -> Any:
    assert isinstance(result.content[0], types.TextContent)
    text = result.content[0].text
    return json.loads(text) if text.startswith("{") else text


async def exercise_session(client: Client, log: Path) -> None:
    """Surface, search, describe and every kind of call, as one client session sees them."""
    assert client.server_capabilities.tools is not None and client.server_capabilities.tools.list_changed
    tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["alpha__alpha_0000", "tool_search", "tool_describe", "tool_call"]

    found = payload(await client.call_tool("tool_search", {"queries": ["beta service operation 2"]}))
    assert "beta__beta_0002" in found["results"][0]["matches"]
    described = payload(await client.call_tool("tool_describe", {"names": ["beta__beta_0002"]}))
    assert described["tools"]["beta__beta_0002"]["inputSchema"]["required"] == ["value"]

    ok = await client.call_tool("tool_call", {"name": "beta__beta_0002", "arguments": {"value": "5"}})
    assert not ok.is_error and payload(ok) == {"tool": "beta_0002", "arguments": {"value": 5}}
    missing = await client.call_tool("tool_call", {"name": "beta__beta_0001", "arguments": {}})
    assert missing.is_error and payload(missing)["constraint"] == "required"
    unknown = await client.call_tool("tool_call", {"name": "beta_0003", "arguments": {"value": 1}})
    assert unknown.is_error and "beta__beta_0003" in payload(unknown)
    core = await client.call_tool("alpha__alpha_0000", {"value": 7})
    assert not core.is_error
    assert calls(log) == [{"tool": "beta_0002", "arguments": {"value": 5}},
                          {"tool": "alpha_0000", "arguments": {"value": 7}}]


async def exercise_narrow_profile(client: Client) -> None:
    found = payload(await client.call_tool("tool_search", {"queries": ["alpha operation"]}))
    assert found["total_available"] == 4
    refused = await client.call_tool("tool_call", {"name": "alpha__alpha_0001", "arguments": {"value": 1}})
    missing = await client.call_tool("tool_call", {"name": "alpha__no_such_tool", "arguments": {"value": 1}})
    assert refused.is_error and payload(refused).startswith("Unknown tool 'alpha__alpha_0001'")
    assert payload(refused).replace("alpha__alpha_0001", "X") == payload(missing).replace("alpha__no_such_tool", "X")


@pytest.mark.parametrize("mode", MODES)
async def test_stdio_session(fleet: Path, mode: str) -> None:
    async with Client(serve_stdio(fleet), mode=mode) as client:
        await exercise_session(client, fleet.parent / "calls.jsonl")


@pytest.mark.parametrize("mode", MODES)
async def test_stdio_profiles_by_flag_and_by_client_name(fleet: Path, mode: str) -> None:
    async with Client(serve_stdio(fleet, "--profile", "betaonly"), mode=mode) as client:
        await exercise_narrow_profile(client)
    info = types.Implementation(name="beta-desktop", version="1")
    async with Client(serve_stdio(fleet), mode=mode, client_info=info) as client:
        await exercise_narrow_profile(client)


@pytest.mark.parametrize("mode", MODES)
async def test_http_sessions_and_profiles_by_path(fleet: Path, mode: str) -> None:
    async with serve_http(fleet, free_port()) as base:
        async with Client(streamable_http_client(f"{base}/mcp"), mode=mode) as client:
            await exercise_session(client, fleet.parent / "calls.jsonl")
        async with Client(streamable_http_client(f"{base}/mcp/betaonly"), mode=mode) as client:
            await exercise_narrow_profile(client)


async def test_http_refuses_foreign_hosts_origins_unknown_profiles_and_bad_tokens(fleet: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream"}
    async with serve_http(fleet, free_port(), env={"TOOLBRIDGE_AUTH_TOKEN": "s3cret"}) as base:
        async with httpx2.AsyncClient() as http:
            foreign = await http.post(f"{base}/mcp", json=body, headers={**headers, "Host": "evil.example"})
            assert foreign.status_code == 421
            origin = await http.post(f"{base}/mcp", json=body, headers={**headers, "Origin": "https://evil.example"})
            assert origin.status_code == 403
            no_token = await http.post(f"{base}/mcp", json=body, headers=headers)
            assert no_token.status_code == 401  # no OAuth to discover: it says what to send instead
            assert no_token.headers["WWW-Authenticate"] == 'Bearer realm="toolbridge"'
            assert "no bearer token was sent" in no_token.text and "Authorization: Bearer <token>" in no_token.text
            wrong = await http.post(f"{base}/mcp", json=body, headers={**headers, "Authorization": "Bearer nope"})
            assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["WWW-Authenticate"]
            assert "not this endpoint's" in wrong.text and "s3cret" not in wrong.text
            authorized = {**headers, "Authorization": "Bearer s3cret"}
            unknown = await http.post(f"{base}/mcp/nosuchprofile", json=body, headers=authorized)
            assert unknown.status_code == 404
            plain = await http.post(f"{base}/mcp", content=b"{}", headers={**authorized, "Content-Type": "text/plain"})
            assert plain.status_code == 400
            with anyio.fail_after(20):  # a readiness probe: 503 until both servers settled
                while (ready := await http.get(f"{base}/healthz")).status_code != 200:
                    assert ready.status_code == 503 and ready.json()["status"] == "starting"
                    await anyio.sleep(0.05)
            assert ready.json() == {"status": "ok", "servers": {"alpha": "ready", "beta": "ready"}}
        http_client = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
        async with http_client, Client(streamable_http_client(f"{base}/mcp", http_client=http_client)) as client:
            assert len((await client.list_tools()).tools) == 4


async def test_forty_concurrent_http_clients(fleet: Path) -> None:
    log = fleet.parent / "calls.jsonl"
    async with serve_http(fleet, free_port()) as base:

        async def one_client(index: int) -> None:
            async with Client(streamable_http_client(f"{base}/mcp"), mode="legacy" if index % 2 else "auto") as c:
                for call in range(5):
                    value = index * 10 + call
                    result = await c.call_tool("tool_call", {"name": "beta__beta_0001", "arguments": {"value": value}})
                    assert payload(result) == {"tool": "beta_0001", "arguments": {"value": value}}

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for index in range(40):
                    tg.start_soon(one_client, index)
    values = sorted(c["arguments"]["value"] for c in calls(log))
    assert values == sorted(i * 10 + c for i in range(40) for c in range(5))


async def surface(config: Path, *extra: str) -> tuple[bytes, str]:
    async with Client(serve_stdio(config, *extra), mode="legacy") as client:
        tools = (await client.list_tools()).tools
    search = next(t for t in tools if t.name == "tool_search")
    return wire(tools), search.description or ""


def collapsed(description: str) -> list[str]:
    summary = re.compile(r"^(\S+) \(\d+ tools — names not listed; discover via `tool_search`\)$")
    return sorted(m.group(1) for line in description.splitlines() if (m := summary.match(line)))


async def test_big_fleets_collapse_largest_first_and_connect_order_changes_nothing(tmp_path: Path) -> None:
    def fleet_dir(name: str, slow: str) -> Path:
        servers = {
            "big": ["--tools", "2000", "--prefix", "big"],
            "mid": ["--tools", "40", "--prefix", "mid"],
            "small": ["--tools", "6", "--prefix", "small"],
        }
        servers[slow] += ["--slow-start", "1"]
        return write_fleet(tmp_path / name, servers, {"startup_wait": 20})

    first, second = fleet_dir("one", "big"), fleet_dir("two", "small")
    wide_first, description = await surface(first, "--context-tokens", "200000")
    assert collapsed(description) == ["big"]
    assert "mid__mid_0039" in description and "small__small_0005" in description
    wide_second, _ = await surface(second, "--context-tokens", "200000")
    assert wide_first == wide_second
    _, narrow = await surface(first, "--context-tokens", "4000")
    assert collapsed(narrow) == ["big", "mid"]


def test_check_names_the_broken_file(tmp_path: Path) -> None:
    config = write_fleet(tmp_path, {"good": []})
    (config / "upstreams" / "broken.yaml").write_text("command: [unclosed\n")
    done = subprocess.run([sys.executable, "-m", "proxy", "check", "--config-dir", str(config)],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode != 0
    assert "broken.yaml" in done.stderr and "good.yaml" not in done.stderr
