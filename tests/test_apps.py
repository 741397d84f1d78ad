"""MCP Apps through the in-process gateway: `ui://` namespacing, UI resources, app callbacks, visibility."""

from __future__ import annotations

import json
from typing import Any

import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client, MCPError, types
from servers.apps_server import CSP, HTML, build

from proxy.config import ProfileConfig, ToolsetsConfig

pytestmark = pytest.mark.anyio

UI = "ui://timer/clock/app.html"  # the server `timer`'s `ui://clock/app.html`
MODES = ["legacy", "auto"]
Calls = list[tuple[str, dict[str, Any]]]


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _plain(name: str) -> Upstream:
    """A server with no app: its tools stay deferred, so the session is in the bridge tier."""
    return Upstream(name, [tool("echo", "Echo text back."), tool("show", "Show the clock.")])


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_with_a_ui_is_listed_directly_with_its_namespaced_resource_uri(mode: str) -> None:
    async with gateway([_plain("plain")], servers={"timer": build()}, mode=mode) as harness, \
            Client(harness.server, mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        search = listed["tool_search"].description or ""
    assert listed["timer__show_clock"].meta is not None
    assert listed["timer__show_clock"].meta["ui"] == {"resourceUri": UI}
    assert "tool_search" in listed and "plain__echo" not in listed  # the bridge tier
    assert "timer__tick" not in listed and "tick" not in search  # app-only: not in the listing either
    assert "timer__open_clock" in search and "timer__show_clock" not in search


@pytest.mark.parametrize("mode", MODES)
async def test_the_ui_resource_reads_back_byte_identical_with_its_mime_type_and_csp(mode: str) -> None:
    async with gateway([_plain("plain")], servers={"timer": build()}, mode=mode) as harness, \
            Client(harness.server, mode=mode) as client:
        listed = {r.uri: r for r in (await client.list_resources()).resources}
        read = await client.read_resource(UI)
    assert listed[UI].mime_type == "text/html;profile=mcp-app"
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert (content.uri, content.mime_type, content.text.encode()) == (UI, "text/html;profile=mcp-app", HTML.encode())
    assert content.meta is not None and content.meta["ui"]["csp"] == CSP.model_dump(by_alias=True, exclude_none=True)


@pytest.mark.parametrize("mode", MODES)
async def test_an_app_callback_by_the_name_the_app_knows_reaches_its_server(mode: str) -> None:
    calls: Calls = []
    async with gateway([_plain("plain")], servers={"timer": build(calls)}, mode=mode) as harness, \
            Client(harness.server, mode=mode) as client:
        raw = await client.call_tool("tick", {"seconds": 3})
        qualified = await client.call_tool("timer__tick", {"seconds": 4})
        deferred = await client.call_tool("open_clock", {})
    assert (_text(raw), _text(qualified)) == ("ticked 3", "ticked 4")
    assert not deferred.is_error
    assert calls == [("tick", {"seconds": 3}), ("tick", {"seconds": 4}), ("open_clock", {})]


async def test_app_only_tools_never_show_in_search_or_describe_and_the_model_cannot_call_them() -> None:
    calls: Calls = []
    async with gateway([_plain("plain")], servers={"timer": build(calls)}) as harness, \
            Client(harness.server, mode="legacy") as client:
        found = await client.call_tool("tool_search", {"queries": ["tick advance clock", "timer tick"]})
        described = await client.call_tool("tool_describe", {"names": ["timer__tick"]})
        bridged = await client.call_tool("tool_call", {"name": "timer__tick", "arguments": {}})
    assert "timer__tick" not in _text(found)
    assert json.loads(_text(described))["not_found"] == ["timer__tick"]
    assert bridged.is_error and calls == []


async def test_a_tool_apps_may_not_call_is_not_reached_by_its_raw_name() -> None:
    calls: Calls = []
    async with gateway([_plain("plain")], servers={"timer": build(calls)}) as harness, \
            Client(harness.server, mode="legacy") as client:
        by_app = await client.call_tool("set_alarm", {"at": "7"})
        by_model = await client.call_tool("tool_call", {"name": "timer__set_alarm", "arguments": {"at": "7"}})
    assert by_app.is_error and "Unknown tool" in _text(by_app)
    assert not by_model.is_error and calls == [("set_alarm", {"at": "7"})]


@pytest.mark.parametrize("mode", MODES)
async def test_ui_references_in_results_and_resource_links_are_namespaced(mode: str) -> None:
    async with gateway([_plain("plain")], servers={"timer": build()}, mode=mode) as harness, \
            Client(harness.server, mode=mode) as client:
        result = await client.call_tool("tool_call", {"name": "timer__open_clock", "arguments": {}})
        link = result.content[0]
        assert isinstance(link, types.ResourceLink)
        read = await client.read_resource(link.uri)
    assert link.uri == UI and result.meta is not None and result.meta["ui"]["resourceUri"] == UI
    assert read.contents[0].uri == UI


async def test_a_raw_name_two_app_servers_share_is_refused_with_both_qualified_names() -> None:
    calls: Calls = []
    async with gateway([_plain("plain")], servers={"timer": build(calls), "watch": build(calls)}) as harness, \
            Client(harness.server, mode="legacy") as client:
        shared = await client.call_tool("tick", {})
        one = await client.call_tool("watch__tick", {"seconds": 2})
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert shared.is_error and "timer__tick" in _text(shared) and "watch__tick" in _text(shared)
    assert _text(one) == "ticked 2" and calls == [("tick", {"seconds": 2})]
    assert tools["watch__show_clock"].meta is not None
    assert tools["watch__show_clock"].meta["ui"] == {"resourceUri": "ui://watch/clock/app.html"}


async def test_an_app_of_a_server_outside_the_scope_reaches_nothing() -> None:
    calls: Calls = []
    only_plain = ToolsetsConfig(profiles={"default": ProfileConfig(toolsets=("mcp-plain",))})
    async with gateway([_plain("plain")], only_plain, servers={"timer": build(calls)}) as harness, \
            Client(harness.server, mode="legacy") as client:
        called = await client.call_tool("tick", {})
        with pytest.raises(MCPError):
            await client.read_resource(UI)
    assert called.is_error and calls == []


@pytest.mark.parametrize(("context", "listed_directly"), [(200_000, True), (2000, False)])
async def test_tools_with_a_ui_are_listed_directly_only_within_half_the_listing_budget(
    context: int, listed_directly: bool
) -> None:
    profile = ToolsetsConfig(profiles={"default": ProfileConfig(toolsets=("all",), context_tokens=context)})
    async with gateway([_plain("plain")], profile, servers={"timer": build()}) as harness, \
            Client(harness.server, mode="legacy") as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        found = await client.call_tool("tool_search", {"queries": ["show clock interactive"]})
    assert ("timer__show_clock" in listed) is listed_directly
    assert ("timer__show_clock" in _text(found)) is not listed_directly  # search covers what is not listed
