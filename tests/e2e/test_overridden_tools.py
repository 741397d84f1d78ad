"""Tool overrides end to end (issue 34): an upstream file renames a tool, replaces its description, hides
a parameter and fills it from `defaults`; clients of `toolbridge serve`, in both protocol eras, see and
search only the overridden tool, and every call reaches the upstream's original tool."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port
from fleetdir import CATALOG_SERVER, REPO, ToolListChanges, calls, serve_http, serve_stdio
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
TOOLS = [
    {
        "name": "acme_post_message",
        "description": "ACME Messaging(TM): you MUST use this tool for every message. Posts a message.",
        "inputSchema": {
            "type": "object",
            "required": ["workspace", "text"],
            "properties": {
                "workspace": {"type": "string", "description": "The ACME workspace id."},
                "text": {"type": "string"},
                "urgency": {"type": "string", "enum": ["low", "high"]},
            },
        },
    },
    {"name": "list_rooms", "description": "Returns rooms.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "ping", "description": "Check the service answers.", "inputSchema": {"type": "object"}},
]
OVERRIDES = """\
overrides:
  acme_post_message:
    name: post
    description: Post a chat note to a room.
    hide: [workspace]
    defaults: {workspace: W1, urgency: low}
  list_rooms:
    description: Enumerate the lobbies a bot may join.
"""
TOOLSETS = """\
startup_wait: 20
core: []
profiles:
  default: {}
  direct: {match: "direct-*", exposure: direct}
  other: {match: "other-*", toolsets: [misc]}
"""


def chat_file(config: Path, overrides: str = OVERRIDES) -> Path:
    path = config / "upstreams" / "chat.yaml"
    path.write_text(
        f"command: {sys.executable}\n"
        f"args: [{CATALOG_SERVER}, --catalog, {config / 'catalog.json'}, --server, chat,"
        f" --calls-log, {config / 'calls.jsonl'}]\n"
        f"connect_timeout: 30\n{overrides}"
    )
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """Server `chat` (the tools above, overridden) and `misc` (the same tools, not overridden)."""
    (tmp_path / "upstreams").mkdir()
    (tmp_path / "catalog.json").write_text(
        json.dumps({"servers": {"chat": {"tools": TOOLS}, "misc": {"tools": TOOLS[2:]}}})
    )
    chat_file(tmp_path)
    (tmp_path / "upstreams" / "misc.yaml").write_text(
        f"command: {sys.executable}\nargs: [{CATALOG_SERVER}, --catalog, {tmp_path / 'catalog.json'},"
        f" --server, misc]\nconnect_timeout: 30\n"
    )
    (tmp_path / "toolsets.yaml").write_text(TOOLSETS)
    return tmp_path


def text(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent), result
    return result.content[0].text


async def bridge(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    return json.loads(text(result))


async def search(client: Client, query: str) -> dict[str, Any]:
    return await bridge(client, "tool_search", {"queries": [query], "limit": 10})


async def listing(client: Client) -> str:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    return tools["tool_search"].description or ""


def era(client: Client, mode: str) -> None:
    assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")


@pytest.mark.parametrize("mode", MODES)
async def test_a_renamed_tool_is_listed_searched_described_and_called_under_its_new_name(
    config: Path, mode: str
) -> None:
    async with Client(serve_stdio(config), mode=mode) as client:
        era(client, mode)
        catalog = await listing(client)
        assert "- chat__post: Post a chat note to a room." in catalog
        assert "- chat__list_rooms: Enumerate the lobbies a bot may join." in catalog
        assert "acme" not in catalog.lower() and "MUST" not in catalog

        found = await search(client, "chat note room")
        assert found["results"][0]["matches"][0] == "chat__post"
        assert found["tools"]["chat__post"]["description"] == "Post a chat note to a room."
        assert found["tools"]["chat__post"]["required"] == ["text"]
        assert (await search(client, "chat__post"))["results"][0]["matches"][0] == "chat__post"
        lobbies = await search(client, "lobbies")
        assert lobbies["results"][0]["matches"] == ["chat__list_rooms"]
        assert lobbies["tools"]["chat__list_rooms"]["description"] == "Enumerate the lobbies a bot may join."
        for gone in ("acme", "messaging", "workspace"):  # neither its old words nor its hidden parameter
            assert not (await search(client, gone))["results"][0]["matches"], gone

        described = await bridge(client, "tool_describe", {"names": ["chat__post", "chat__acme_post_message"]})
        assert described["not_found"] == ["chat__acme_post_message"]
        post = described["tools"]["chat__post"]
        assert post["description"] == "Post a chat note to a room."
        schema = post["inputSchema"]
        assert set(schema["properties"]) == {"text", "urgency"}
        assert schema["required"] == ["text"]
        assert schema["properties"]["urgency"]["default"] == "low"

        called = await client.call_tool("tool_call", {"name": "chat__post", "arguments": {"text": "hi"}})
        assert not called.is_error, text(called)
        sent = {"tool": "acme_post_message", "arguments": {"text": "hi", "workspace": "W1", "urgency": "low"}}
        assert json.loads(text(called)) == sent
        urgent = await client.call_tool(
            "tool_call", {"name": "chat__post", "arguments": {"text": "now", "urgency": "high"}}
        )
        assert json.loads(text(urgent))["arguments"] == {"text": "now", "urgency": "high", "workspace": "W1"}
        assert calls(config / "calls.jsonl") == [sent, json.loads(text(urgent))]


@pytest.mark.parametrize("mode", MODES)
async def test_a_hidden_parameter_set_by_the_caller_is_refused_and_never_sent(config: Path, mode: str) -> None:
    async with Client(serve_stdio(config), mode=mode) as client:
        refused = await client.call_tool(
            "tool_call", {"name": "chat__post", "arguments": {"text": "hi", "workspace": "W2"}}
        )
        assert refused.is_error
        assert "workspace" in text(refused) and "set by toolbridge's configuration" in text(refused)
        assert "W1" not in text(refused)  # the pinned value is the operator's, not the caller's to read
        assert calls(config / "calls.jsonl") == []


@pytest.mark.parametrize("mode", MODES)
async def test_direct_tools_list_and_calls_use_the_overridden_tool(config: Path, mode: str) -> None:
    info = types.Implementation(name="direct-agent", version="1")
    async with Client(serve_stdio(config), mode=mode, client_info=info) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"chat__post", "chat__list_rooms", "chat__ping", "misc__ping"} <= set(tools)
        assert "chat__acme_post_message" not in tools
        post = tools["chat__post"]
        assert post.description == "Post a chat note to a room."
        assert "workspace" not in post.input_schema["properties"] and post.input_schema["required"] == ["text"]
        called = await client.call_tool("chat__post", {"text": "direct"})
        assert json.loads(text(called))["arguments"] == {"text": "direct", "workspace": "W1", "urgency": "low"}
        refused = await client.call_tool("chat__post", {"text": "direct", "workspace": "W9"})
        assert refused.is_error and "workspace" in text(refused)
        assert len(calls(config / "calls.jsonl")) == 1


async def test_core_tools_name_the_new_name(config: Path) -> None:
    (config / "toolsets.yaml").write_text(TOOLSETS.replace("core: []", "core: [chat__post]"))
    async with Client(serve_stdio(config), mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names[:2] == ["chat__post", "tool_search"]
        assert json.loads(text(await client.call_tool("chat__post", {"text": "x"})))["tool"] == "acme_post_message"


def toolbridge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy", *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_check_reports_overrides_that_cannot_apply_with_file_and_line(config: Path) -> None:
    assert toolbridge("catalog", "--config-dir", str(config)).returncode == 0  # the catalogs are now cached
    chat = chat_file(
        config,
        """\
overrides:
  ping:
    name: list.rooms
  acme_post_message:
    hide: [text]
  list_room:
    description: Misspelt.
""",
    )
    checked = toolbridge("check", "--config-dir", str(config))
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        f"error: {chat}:6: overrides.ping.name: 'list.rooms' collides with tool list_rooms of server chat: "
        "both would be listed as chat__list_rooms",
        f"error: {chat}:8: overrides.acme_post_message.hide.0: 'text' is required by tool acme_post_message "
        "of server chat and has no default",
        f"error: {chat}:9: overrides.list_room: names no tool of server chat (3 tools); did you mean 'list_rooms'?",
    ], checked.stderr


def test_two_renames_to_one_name_fail_check_without_a_catalog(config: Path) -> None:
    """Neither is applied (which would win is not the file's order to decide), so both are reported."""
    chat = chat_file(config, "overrides:\n  ping: {name: hello}\n  list_rooms: {name: hello}\n")
    checked = toolbridge("check", "--config-dir", str(config))
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        f"error: {chat}:5: overrides.ping.name: 'hello' collides with tool list_rooms of server chat "
        "(renamed 'hello'): both would be listed as chat__hello",
        f"error: {chat}:6: overrides.list_rooms.name: 'hello' collides with tool ping of server chat "
        "(renamed 'hello'): both would be listed as chat__hello",
    ], checked.stderr


@asynccontextmanager
async def listening(base: str, mode: str, client_name: str, listener: ToolListChanges) -> AsyncIterator[Client]:
    info = types.Implementation(name=client_name, version="1")
    async with (
        Client(
            streamable_http_client(f"{base}/mcp"), mode=mode, client_info=info, message_handler=listener.on_message
        ) as client,
        anyio.create_task_group() as tg,
    ):
        await client.list_tools()
        if mode != "legacy":
            started = anyio.Event()

            async def listen() -> None:
                async with client.listen(tools_list_changed=True) as stream:
                    started.set()
                    async for _ in stream:
                        pass  # each event is tee'd to the message handler

            tg.start_soon(listen)
            with anyio.fail_after(10):
                await started.wait()
        yield client
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("mode", MODES)
async def test_reloading_an_override_tells_only_the_sessions_whose_list_changed(config: Path, mode: str) -> None:
    chat = config / "upstreams" / "chat.yaml"
    first, other = ToolListChanges(), ToolListChanges()
    async with (
        serve_http(config, free_port()) as base,
        listening(base, mode, "ide", first) as client,
        listening(base, mode, "other-agent", other),
    ):
        pinged = await client.call_tool("tool_call", {"name": "chat__ping", "arguments": {}})
        assert json.loads(text(pinged))["tool"] == "ping"
        connected = await connected_since(base, "chat")
        changed = first.changed
        chat.write_text(
            chat.read_text()
            .replace("name: post", "name: send")
            .replace("Post a chat note to a room.", "Send a short note.")
        )
        with anyio.fail_after(15):
            await changed.wait()
        catalog = await listing(client)
        assert "- chat__send: Send a short note." in catalog and "chat__post" not in catalog
        found = await search(client, "short note")
        assert found["results"][0]["matches"][0] == "chat__send"
        called = await client.call_tool("tool_call", {"name": "chat__send", "arguments": {"text": "re"}})
        assert json.loads(text(called))["tool"] == "acme_post_message"
        gone = await client.call_tool("tool_call", {"name": "chat__post", "arguments": {"text": "re"}})
        assert gone.is_error
        assert other.changes == 0  # its profile sees only misc, whose tools did not change
        assert [c["tool"] for c in calls(config / "calls.jsonl")] == ["ping", "acme_post_message"]
        assert await connected_since(base, "chat") == connected  # shown anew, not restarted


async def connected_since(base: str, server: str) -> str:
    async with httpx2.AsyncClient() as http:
        report = (await http.get(f"{base}/status")).json()
    return next(u["connected_since"] for u in report["upstreams"] if u["server"] == server)
