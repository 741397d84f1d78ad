"""Argument coercion and validation for `tool_call`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client

from proxy.config import ToolOverride, ToolsetsConfig
from proxy.downstream import check_arguments, coerce_arguments
from proxy.errors import InvalidArguments

pytestmark = pytest.mark.anyio

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1},
        "ratio": {"type": "number"},
        "force": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "options": {"type": "object"},
        "name": {"type": "string"},
        "maybe": {"type": ["integer", "null"]},
        "nested": {"type": "object", "properties": {"depth": {"type": "integer"}}},
    },
    "required": ["count"],
}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"count": "5"}, {"count": 5}),
        ({"count": 5, "ratio": "0.5"}, {"count": 5, "ratio": 0.5}),
        ({"count": 1, "ratio": "3"}, {"count": 1, "ratio": 3}),
        ({"count": 1, "force": "true"}, {"count": 1, "force": True}),
        ({"count": 1, "force": "False"}, {"count": 1, "force": False}),
        ({"count": 1, "tags": '["a", "b"]'}, {"count": 1, "tags": ["a", "b"]}),
        ({"count": 1, "options": '{"x": 1}'}, {"count": 1, "options": {"x": 1}}),
        ({"count": 1, "name": "42"}, {"count": 1, "name": "42"}),
        ({"count": 1, "maybe": "null"}, {"count": 1, "maybe": None}),
        ({"count": 1, "maybe": "7"}, {"count": 1, "maybe": 7}),
        ({"count": "many"}, {"count": "many"}),
        ({"count": 1, "unknown": "3"}, {"count": 1, "unknown": "3"}),
    ],
)
def test_strings_are_coerced_to_the_declared_type(given: dict[str, Any], expected: dict[str, Any]) -> None:
    assert coerce_arguments(given, SCHEMA) == expected


@pytest.mark.parametrize(
    ("given", "path", "constraint"),
    [
        ({}, "arguments.count", "required"),
        ({"count": "many"}, "arguments.count", "type"),
        ({"count": 0}, "arguments.count", "minimum"),
        ({"count": 1, "tags": [1]}, "arguments.tags[0]", "type"),
        ({"count": 1, "nested": {"depth": "x"}}, "arguments.nested.depth", "type"),
    ],
)
async def test_invalid_arguments_report_path_and_constraint(given: dict[str, Any], path: str, constraint: str) -> None:
    with pytest.raises(InvalidArguments) as caught:
        await check_arguments(given, SCHEMA)
    assert (caught.value.path, caught.value.constraint) == (path, constraint)
    assert caught.value.input_schema == SCHEMA


async def test_a_missing_argument_is_reported_with_what_else_is_wrong() -> None:
    """One answer names every fix: the missing key and a wrong-typed one given beside it."""
    with pytest.raises(InvalidArguments) as caught:
        await check_arguments({"ratio": "half"}, SCHEMA)
    assert (caught.value.path, caught.value.constraint) == ("arguments.count", "required")
    assert str(caught.value) == "missing required argument: count; also arguments.ratio: 'half' is not of type 'number'"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"$ref": "https://example.com/external.json"}}},
        {"type": "object", "properties": {"x": {"type": "no-such-type"}}},
        {"type": 12},
    ],
)
async def test_unusable_schemas_let_the_call_through(schema: dict[str, Any]) -> None:
    assert await check_arguments({"x": 1}, schema) == {"x": 1}


async def test_none_arguments_are_an_empty_object() -> None:
    assert await check_arguments(None, {"type": "object"}) == {}


async def test_a_tool_whose_schema_changed_is_checked_against_the_new_one() -> None:
    """Prepared checks are kept per tool definition: a refreshed schema is never checked by the old one."""
    upstream = Upstream("a", [tool("set", properties={"x": {"type": "integer"}}, required=["x"])])
    async with gateway([upstream], ToolsetsConfig(core=("*",))) as harness, Client(harness.server) as client:
        refused = await client.call_tool("a__set", {"x": "many"})
        assert refused.is_error and upstream.calls == []
        upstream.tools = [tool("set", properties={"x": {"type": "string"}}, required=["x"])]
        await harness.refresh("a")
        accepted = await client.call_tool("a__set", {"x": "many"})
        assert not accepted.is_error
        assert upstream.calls == [("set", {"x": "many"})]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_overrides_hidden_parameter_is_refused_and_its_defaults_filled_after_the_check(mode: str) -> None:
    """The caller is checked against the schema it sees (no `workspace`, `count` optional), then what the
    override fills in goes upstream; a hidden parameter given never reaches it, directly or through tool_call."""
    schema = {"workspace": {"type": "string"}, "text": {"type": "string"}, "count": {"type": "integer"}}
    upstream = Upstream("a", [tool("post", properties=schema, required=["workspace", "text", "count"])])
    upstream.tools[0].input_schema["additionalProperties"] = False
    override = ToolOverride(hide=("workspace",), defaults={"workspace": "W1", "count": 1})
    async with gateway([upstream], ToolsetsConfig(core=("*",))) as harness, \
            Client(harness.server, mode=mode) as client:
        harness.registry.set_overrides("a", {"post": override})
        sent = await client.call_tool("a__post", {"text": "hi", "count": "3"})
        assert not sent.is_error, sent
        via_bridge = await client.call_tool("tool_call", {"name": "a__post", "arguments": {"text": "yo"}})
        assert not via_bridge.is_error, via_bridge
        assert upstream.calls == [("post", {"workspace": "W1", "count": 3, "text": "hi"}),
                                  ("post", {"workspace": "W1", "count": 1, "text": "yo"})]
        for name, arguments in (("a__post", {"text": "hi", "workspace": "W2"}),
                                ("tool_call", {"name": "a__post", "arguments": {"workspace": "W1"}})):
            refused = await client.call_tool(name, arguments)
            assert refused.is_error
            error = json.loads(refused.content[0].text)  # type: ignore[union-attr]
            assert (error["path"], error["constraint"]) == ("arguments.workspace", "hidden")
            assert "workspace" not in error["inputSchema"]["properties"]
        assert len(upstream.calls) == 2


HEADERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        "scope": {"type": "object", "properties": {"team": {"type": "string", "x-mcp-header": "Team"}}},
        "plain": {"type": "boolean"},
    },
    "required": ["region"],
}


@pytest.mark.parametrize(
    "given",
    [{"region": "eu", "verbose": None}, {"region": "eu", "scope": {"team": None}}],
)
async def test_a_null_header_argument_counts_as_not_given_and_goes_upstream_as_sent(given: dict[str, Any]) -> None:
    """SEP-2243: a `null` for a property mirrored into an `Mcp-Param-*` header means the header is left out;
    the caller's `null` is not a wrong type (the suite's `sep-2243-client-omit-null` sends one)."""
    assert await check_arguments(given, HEADERS) == given


@pytest.mark.parametrize(
    ("given", "path", "constraint"),
    [
        ({"region": None}, "arguments.region", "required"),  # not given, and it is required
        ({"region": "eu", "plain": None}, "arguments.plain", "type"),  # no header: null is just the wrong type
        ({"region": "eu", "verbose": "loud"}, "arguments.verbose", "type"),
    ],
)
async def test_other_nulls_and_wrong_header_values_are_still_refused(
    given: dict[str, Any], path: str, constraint: str
) -> None:
    with pytest.raises(InvalidArguments) as caught:
        await check_arguments(given, HEADERS)
    assert (caught.value.path, caught.value.constraint) == (path, constraint)
