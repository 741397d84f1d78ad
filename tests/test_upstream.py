"""Pure parts of `proxy.upstream`: command lookup, tool filters, result stamps."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import types

from proxy.protocol import strip_server_info
from proxy.upstream import filter_tools, resolve_command


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"})


def test_command_is_found_next_to_the_interpreter_when_not_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert resolve_command("mcp-server-time") == str(Path(sys.executable).parent / "mcp-server-time")
    assert resolve_command("no-such-command-anywhere") is None


@pytest.mark.parametrize(("include", "exclude", "expected"), [
    ((), (), ["a_get", "a_set", "b_get"]),
    (("a_*",), (), ["a_get", "a_set"]),
    ((), ("*_set",), ["a_get", "b_get"]),
    (("*_get", "a_set"), ("b*",), ["a_get", "a_set"]),
    (("A_GET",), (), []),  # globs are case-sensitive, like tool names
])
def test_filters_apply_globs_to_raw_names(include: tuple[str, ...], exclude: tuple[str, ...],
                                          expected: list[str]) -> None:
    tools = [tool("a_get"), tool("a_set"), tool("b_get")]
    assert [t.name for t in filter_tools(tools, include, exclude)] == expected


def test_server_info_stamp_is_stripped_and_the_rest_kept() -> None:
    stamped = types.CallToolResult(content=[], _meta={types.SERVER_INFO_META_KEY: {"name": "up"}, "k": 1})
    assert strip_server_info(stamped).meta == {"k": 1}
    only = types.CallToolResult(content=[], _meta={types.SERVER_INFO_META_KEY: {"name": "up"}})
    assert strip_server_info(only).meta is None
