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


# outputSchema shapes only the 2026 era takes (the spec's own example is an array), and a result of each
SHAPES: dict[str, tuple[dict[str, Any], Any]] = {
    "array": ({"type": "array", "items": {"type": "integer"}}, [1, 2, 3]),
    "ref": ({"$ref": "#/$defs/Point", "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}},
                                                          "required": ["x"]}}}, {"x": 1}),
    "anyOf": ({"anyOf": [{"type": "object"}, {"type": "string"}]}, "plain"),
    "scalar": ({"type": "integer"}, 42),
}


def shaped_server(schema: dict[str, Any], value: Any) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool("plain"), tool("shaped").model_copy(update={"output_schema": schema})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = types.TextContent(type="text", text=json.dumps(value))
        return types.CallToolResult(content=[text], structured_content=value)

    return Server("shapes", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.parametrize("era", ["legacy", "auto"])
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_a_tool_whose_output_schema_only_the_2026_era_takes_is_listed_and_called_in_both_eras(
    shape: str, era: str
) -> None:
    """Carried, not dropped: a 2026-era client gets the schema and the value as sent; a handshake-era client, whose
    era takes only an object schema, gets the tool without one, and a value that is not an object as text."""
    schema, value = SHAPES[shape]
    async with (
        gateway([], CORE, servers={"shapes": shaped_server(schema, value)}, mode="auto") as harness,
        Client(harness.server, mode=era) as client,
    ):
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("shapes__shaped", {})
    assert set(listed) == {"shapes__plain", "shapes__shaped"}
    assert not result.is_error, result
    assert [c.text for c in result.content if isinstance(c, types.TextContent)] == [json.dumps(value)]
    if era == "auto":
        assert listed["shapes__shaped"].output_schema == schema and result.structured_content == value
    else:
        assert listed["shapes__shaped"].output_schema is None
        assert result.structured_content == (value if isinstance(value, dict) else None)
