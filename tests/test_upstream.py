"""Pure parts of `proxy.upstream`: command lookup, tool filters, result stamps, error translation."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx2
import pytest
from mcp import MCPError, types

from proxy.errors import UpstreamTimeout, UpstreamUnavailable
from proxy.spawn import resolve_command
from proxy.upstream import filter_tools, strip_server_info
from proxy.upstream_errors import UpstreamRefused, translate


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


def _status_error(status: int) -> httpx2.HTTPStatusError:
    request = httpx2.Request("GET", "http://h/sse?token=SECRET-TOKEN")
    return httpx2.HTTPStatusError("bad", request=request, response=httpx2.Response(status, request=request))


@pytest.mark.parametrize(("exc", "statuses", "kind", "reason"), [
    (MCPError(types.INTERNAL_ERROR, "Server returned an error response"), [401], UpstreamRefused,
     "authentication failed (HTTP 401)"),
    (MCPError(types.METHOD_NOT_FOUND, "Not Found"), [404, 404], UpstreamRefused, "not an MCP endpoint (HTTP 404)"),
    (_status_error(403), [], UpstreamRefused, "not an MCP endpoint (HTTP 403)"),
    (_status_error(503), [], UpstreamUnavailable, "HTTP 503"),
    (ExceptionGroup("g", [httpx2.ConnectError("refused")]), [], UpstreamUnavailable, "cannot reach the server"),
    (MCPError(types.CONNECTION_CLOSED, "Connection closed"), [], UpstreamUnavailable, "connection closed"),
    (MCPError(types.REQUEST_TIMEOUT, "timed out"), [], UpstreamTimeout, "request timed out"),
    (FileNotFoundError(2, "No such file or directory"), [], UpstreamUnavailable, "No such file"),
])
def test_foreign_errors_become_upstream_errors(exc: Exception, statuses: list[int], kind: type,
                                               reason: str) -> None:
    error = translate("srv", exc, statuses)
    assert type(error) is kind
    assert reason in str(error) and str(error).startswith("upstream 'srv': ")


def test_translated_errors_never_carry_credentials() -> None:
    exc = httpx2.ConnectError("failed for http://u:SECRET-PW@h/mcp?token=SECRET-TOKEN Bearer SECRET-BEARER")
    assert "SECRET" not in str(translate("srv", exc))
