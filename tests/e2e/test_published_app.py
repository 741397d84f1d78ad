"""MCP Apps behind `toolbridge serve` (stdio and HTTP): the published
`@modelcontextprotocol/server-basic-vanillajs` example (TypeScript, pinned in package.json) and the
SDK app server (`servers/apps_server.py`), both as stdio upstreams, reached by SDK clients of both
protocol eras."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import free_port
from fleetdir import REPO, serve_http, serve_stdio, write_config
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

BASIC = REPO / "node_modules" / "@modelcontextprotocol" / "server-basic-vanillajs" / "dist"
APPS_SERVER = REPO / "tests" / "servers" / "apps_server.py"
CASES = [("stdio", "legacy"), ("stdio", "auto"), ("http", "auto")]
UI = "ui://basic/get-time/mcp-app.html"  # the example's `ui://get-time/mcp-app.html`, as server `basic`'s


def _config(directory: Path, log: Path) -> Path:
    return write_config(directory, {
        "basic": {"command": "node", "args": [str(BASIC / "index.js"), "--stdio"]},
        "clock": {"command": sys.executable, "args": [str(APPS_SERVER), "--log", str(log)]},
    }, {"startup_wait": 30})


@asynccontextmanager
async def _session(transport: str, mode: str, config: Path) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with Client(serve_stdio(config), mode=mode) as client:
            yield client
        return
    async with serve_http(config, free_port()) as base, \
            Client(streamable_http_client(f"{base}/mcp"), mode=mode) as client:
        yield client


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.skipif(not BASIC.exists(), reason="server-basic-vanillajs not installed: run scripts/setup.sh")
@pytest.mark.parametrize(("transport", "mode"), CASES)
async def test_a_published_mcp_app_works_behind_toolbridge(transport: str, mode: str, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with anyio.fail_after(90):
        async with _session(transport, mode, _config(tmp_path / "config", log)) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            read = await client.read_resource(UI)
            called_back = await client.call_tool("get-time", {})
            ticked = await client.call_tool("tick", {"seconds": 5})
            found = await client.call_tool("tool_search", {"queries": ["tick advance clock", "clock"]})
    meta: dict[str, Any] = listed["basic__get-time"].meta or {}
    assert meta["ui"]["resourceUri"] == meta["ui/resourceUri"] == UI
    assert (listed["clock__show_clock"].meta or {})["ui"]["resourceUri"] == "ui://clock/clock/app.html"
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert content.mime_type == "text/html;profile=mcp-app"
    assert content.text.encode() == (BASIC / "mcp-app.html").read_bytes()
    assert not called_back.is_error and called_back.structured_content is not None
    assert _text(ticked) == "ticked 5" and json.loads(log.read_text()) == ["tick", {"seconds": 5}]
    assert "tick" not in json.loads(_text(found))["tools"] and "clock__tick" not in _text(found)
