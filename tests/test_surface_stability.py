"""A session's surface holds still while servers restart, and every tool it was shown still answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client, types

from proxy.config import ToolSearchSettings, ToolsetsConfig

pytestmark = pytest.mark.anyio

CORE = ToolsetsConfig(core=("a__resize",))


def fleet() -> list[Upstream]:
    return [
        Upstream("a", [tool("resize", "Resize a volume.", {"size_gb": {"type": "integer", "minimum": 1}},
                            ["size_gb"])]),
        Upstream("b", [tool("list", "List things."), tool("show", "Show a thing.")]),
    ]


def text(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


async def names(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


async def test_the_tier_does_not_flip_while_a_server_is_down() -> None:
    down: set[str] = set()
    async with gateway(fleet(), CORE, available=lambda s: s not in down) as harness, \
            Client(harness.server) as client:
        before = await names(client)
        down.add("b")
        harness.registry.bump()
        assert await names(client) == before == ["a__resize", "tool_search", "tool_describe", "tool_call"]
        result = await client.call_tool("tool_call", {"name": "b__list", "arguments": {}})
        assert not result.is_error and text(result).startswith("b.list")


async def test_bridge_tools_answer_in_the_pass_through_tier() -> None:
    toolsets = ToolsetsConfig(tool_search=ToolSearchSettings(enabled="off"))
    async with gateway(fleet(), toolsets) as harness, Client(harness.server) as client:
        assert "tool_call" not in await names(client)
        found = json.loads(text(await client.call_tool("tool_search", {"queries": ["list things"]})))
        assert "b__list" in found["results"][0]["matches"]
        result = await client.call_tool("tool_call", {"name": "b__show", "arguments": {}})
        assert not result.is_error and text(result).startswith("b.show")


async def test_when_the_last_deferred_tool_leaves_no_answer_points_to_tool_search() -> None:
    async with gateway(fleet(), CORE) as harness, Client(harness.server) as client:
        harness.registry.set_server_tools("b", [])
        assert await names(client) == ["a__resize"]
        for name, arguments in [("b__list", {}), ("tool_call", {"name": "b__list", "arguments": {}})]:
            result = await client.call_tool(name, arguments)
            assert result.is_error and "tool_search" not in text(result), text(result)


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"size_gb": "5"}, None),
    ({}, "required"),
    ({"size_gb": 0}, "minimum"),
])
async def test_core_tools_get_the_same_checks_as_tool_call(arguments: dict[str, Any], expected: str | None) -> None:
    upstreams = fleet()
    async with gateway(upstreams, CORE) as harness, Client(harness.server) as client:
        result = await client.call_tool("a__resize", arguments)
    if expected is None:
        assert not result.is_error and upstreams[0].calls == [("resize", {"size_gb": 5})]
    else:
        assert result.is_error and json.loads(text(result))["constraint"] == expected
        assert upstreams[0].calls == []
