"""A 2026-era upstream may send any JSON value as `structuredContent`; the handshake-era schema allows only an
object, so a handshake-era client gets that value as text instead of an invalid result (issue 22)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from inprocess import gateway, tool
from mcp import Client, types
from mcp.server.lowlevel import Server

from proxy.config import ToolsetsConfig

pytestmark = pytest.mark.anyio

CORE = ToolsetsConfig(core=("*",))


def values_server(content: list[types.ContentBlock]) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool("values")])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=content, structured_content=[1, 2, 3])

    return Server("vals", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.parametrize("text", [True, False])
async def test_a_handshake_era_client_gets_a_non_object_structured_content_as_text(text: bool) -> None:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text="1, 2, 3")] if text else []
    async with gateway([], CORE, servers={"vals": values_server(content)}, mode="auto") as harness:
        async with Client(harness.server, mode="legacy") as legacy:
            old = await legacy.call_tool("vals__values", {})
        async with Client(harness.server) as modern:
            new = await modern.call_tool("vals__values", {})
    assert not old.is_error and old.structured_content is None
    assert [c.text for c in old.content if isinstance(c, types.TextContent)] == (["1, 2, 3"] if text else ["[1, 2, 3]"])
    assert not new.is_error and new.structured_content == [1, 2, 3]
    assert json.loads(json.dumps(new.structured_content)) == [1, 2, 3]
