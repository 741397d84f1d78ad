"""Errors and redaction (SPEC §7, §8): credentials never reach logs or error text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from mcp import MCPError, types
from pydantic import ValidationError

from proxy import errors
from proxy.config import load_config
from proxy.errors import (
    BridgeError,
    ConfigError,
    InvalidArguments,
    SessionLost,
    ToolbridgeError,
    ToolCallError,
    UnknownTool,
    UpstreamError,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamUnavailable,
    redact,
    translate,
)

SECRET = "s3cr3t-VALUE_123"

LEAKY = [
    f"Authorization: Bearer {SECRET}",
    f"authorization: bearer {SECRET}",
    f"Bearer {SECRET}",
    f'headers={{"Authorization": "Bearer {SECRET}"}}',
    f"Authorization: Token {SECRET}",
    f"Authorization: {SECRET}",
    f"Proxy-Authorization: Basic {SECRET}",
    f"Basic {SECRET}",
    f"https://api.example.com/v1?key={SECRET}&page=2",
    f"https://api.example.com/v1?api_key={SECRET}",
    f"https://api.example.com/v1?access_token={SECRET}",
    f"token={SECRET}",
    f"TOKEN = {SECRET}",
    f"token: {SECRET}",
    f'{{"token": "{SECRET}"}}',
    f"{{'api_key': '{SECRET}'}}",
    f"password={SECRET}",
    f"PASSWORD: {SECRET}",
    f'password="{SECRET} with spaces"',
    f"passwd={SECRET}",
    f"secret={SECRET}",
    f"client_secret={SECRET}",
    f"refresh_token={SECRET}",
    f"GITHUB_TOKEN={SECRET}",
    f"OPENAI_API_KEY={SECRET}",
    f"x-api-key: {SECRET}",
    f"apikey={SECRET}",
    f"accessToken: {SECRET}",
    f"https://user:{SECRET}@mcp.example.com/mcp",
    f"redis://:{SECRET}@localhost:6379/0",
    f"connect failed: postgresql://admin:{SECRET}@db:5432/x (timeout)",
]


@pytest.mark.parametrize("text", LEAKY)
def test_redact_removes_the_secret(text: str) -> None:
    redacted = redact(text)
    assert SECRET not in redacted
    assert "s3cr3t" not in redacted
    assert "[REDACTED]" in redacted


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer [REDACTED]"),
        ("token=abc&page=2", "token=[REDACTED]&page=2"),
        ("https://user:pw@host/path", "https://user:[REDACTED]@host/path"),
        ("key=a, next=b", "key=[REDACTED], next=b"),
    ],
)
def test_redact_keeps_the_context(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "connection refused",
        "https://mcp.example.com/mcp returned 404",
        "https://user@host/path",
        "git@github.com:org/repo.git",
        "max_tokens=4000 context_tokens: 200000",
        "the author: someone",
        "a basic command: run it",
        "monkey: 3, turkey=4",
        "basic environment",
        "tool_search.listing: 'lots' is not auto/on/off",
        "",
    ],
)
def test_redact_leaves_harmless_text_alone(text: str) -> None:
    assert redact(text) == text


def test_redact_is_idempotent() -> None:
    for text in LEAKY:
        once = redact(text)
        assert redact(once) == once


ERRORS = [
    ToolbridgeError(f"failed with token={SECRET}"),
    ConfigError("/cfg/upstreams/s.yaml", f"headers.Authorization: Bearer {SECRET} is invalid", 3),
    UpstreamError("s", f"GET https://u:{SECRET}@host/mcp failed"),
    UpstreamUnavailable("s", f"Authorization: Bearer {SECRET}"),
    UpstreamTimeout("s", f"password={SECRET}"),
    ToolCallError(f"api_key={SECRET}"),
    InvalidArguments(f"arguments.pw is bad: password={SECRET}", "arguments.x", "type", {"type": "object"}),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_error_text_never_includes_credentials(error: ToolbridgeError) -> None:
    assert SECRET not in str(error)
    assert SECRET not in repr(error)
    assert all(SECRET not in str(arg) for arg in error.args)


def test_hierarchy() -> None:
    assert issubclass(ConfigError, ToolbridgeError)
    assert issubclass(UpstreamUnavailable, UpstreamError)
    assert issubclass(UpstreamRefused, UpstreamUnavailable)
    assert issubclass(SessionLost, UpstreamUnavailable)
    assert issubclass(UpstreamTimeout, UpstreamError)
    assert issubclass(UpstreamError, ToolbridgeError)
    for cls in (BridgeError, UnknownTool, InvalidArguments):
        assert issubclass(cls, ToolCallError)
    assert issubclass(ToolCallError, ToolbridgeError)


def test_the_tree_in_the_docstring_names_every_error_class() -> None:
    classes = {name for name in errors.__all__ if isinstance(getattr(errors, name), type)
               and issubclass(getattr(errors, name), ToolbridgeError)}
    drawn = {line.split("──")[1].split("(")[0].split()[0] for line in errors.__doc__.splitlines() if "──" in line}
    assert drawn | {"ToolbridgeError"} == classes


def test_config_error_carries_path_line_and_reason() -> None:
    error = ConfigError("/cfg/upstreams/s.yaml", "colour: unknown field", 3)
    assert (error.path, error.line, error.reason) == ("/cfg/upstreams/s.yaml", 3, "colour: unknown field")
    assert str(error) == "/cfg/upstreams/s.yaml:3: colour: unknown field"
    assert str(ConfigError("/cfg/x.yaml", "bad")) == "/cfg/x.yaml: bad"


def test_config_error_reason_is_redacted() -> None:
    error = ConfigError("f.yaml", f"token={SECRET}")
    assert SECRET not in error.reason


def test_upstream_error_names_the_server() -> None:
    error = UpstreamTimeout("git", "no answer in 300 s")
    assert error.server == "git"
    assert str(error) == "upstream 'git': no answer in 300 s"


def test_unknown_tool_suggests_names() -> None:
    error = UnknownTool("log", ["git__log", "svn__log"])
    assert error.name == "log"
    assert error.suggestions == ["git__log", "svn__log"]
    assert "Did you mean: git__log, svn__log?" in str(error)
    assert "Did you mean" not in str(UnknownTool("x", []))


def test_invalid_arguments() -> None:
    error = InvalidArguments("missing 'path'", "arguments.path", "required", {"type": "object"})
    assert (error.path, error.constraint, error.input_schema) == ("arguments.path", "required", {"type": "object"})
    assert str(error) == "missing 'path'"


def test_non_string_args_are_kept() -> None:
    error = ToolbridgeError("x", 42)
    assert error.args == ("x", 42)


# --- translate(): foreign failures become the most specific UpstreamError -----------------------

def _status_error(status: int) -> httpx2.HTTPStatusError:
    request = httpx2.Request("GET", "http://h/sse?token=SECRET-TOKEN")
    return httpx2.HTTPStatusError("bad", request=request, response=httpx2.Response(status, request=request))


@pytest.mark.parametrize(("exc", "responses", "kind", "reason"), [
    (MCPError(types.INTERNAL_ERROR, "Server returned an error response"), [(401, "text/plain")], UpstreamRefused,
     "authentication failed (HTTP 401)"),
    (MCPError(types.METHOD_NOT_FOUND, "Not Found"), [(404, ""), (404, "")], UpstreamRefused,
     "not an MCP endpoint (HTTP 404)"),
    (MCPError(types.INVALID_REQUEST, "anything"), [(200, "text/html; charset=utf-8")], UpstreamRefused,
     "not an MCP endpoint (answered text/html"),
    (_status_error(403), [], UpstreamRefused, "not an MCP endpoint (HTTP 403)"),
    (_status_error(503), [], UpstreamUnavailable, "HTTP 503"),
    (ExceptionGroup("g", [httpx2.ConnectError("refused")]), [], UpstreamUnavailable, "cannot reach the server"),
    (MCPError(types.CONNECTION_CLOSED, "Connection closed"), [], UpstreamUnavailable, "connection closed"),
    (MCPError(types.REQUEST_TIMEOUT, "timed out"), [], UpstreamTimeout, "request timed out"),
    (FileNotFoundError(2, "No such file or directory"), [], UpstreamUnavailable, "No such file"),
])
def test_connect_failures_become_upstream_errors(exc: Exception, responses: list[tuple[int, str]], kind: type,
                                                 reason: str) -> None:
    error = translate("srv", exc, responses=responses, connecting=True)
    assert type(error) is kind
    assert reason in str(error) and str(error).startswith("upstream 'srv': ")


MCP_CODES = sorted(value for name, value in vars(types).items() if name.isupper()
                   and isinstance(value, int) and not isinstance(value, bool) and -32800 < value < -31999)


@pytest.mark.parametrize("code", MCP_CODES)
def test_every_mcp_error_code_maps_to_a_documented_error_naming_it(code: int) -> None:
    error = translate("srv", MCPError(code, "what the upstream said"))
    assert code in errors._CODES, f"add error code {code} to errors._CODES"
    assert isinstance(error, UpstreamError) and type(error).__name__ in errors.__doc__
    assert f"code {code}" in str(error)


def test_a_session_the_upstream_forgot_is_known_by_its_404_not_by_message_text() -> None:
    responses = [(200, "application/json"), (404, "")]
    forgotten = translate("srv", MCPError(types.INVALID_REQUEST, "xyz"), responses=responses)
    assert type(forgotten) is SessionLost
    assert type(translate("srv", MCPError(types.INVALID_REQUEST, "Session not found"))) is UpstreamError


def test_a_lost_connection_during_a_call_says_the_outcome_is_uncertain() -> None:
    error = translate("srv", MCPError(types.CONNECTION_CLOSED, "Connection closed"), during="tool 'x'")
    assert type(error) is UpstreamUnavailable and "during tool 'x'; the outcome of the call is uncertain" in str(error)


HTTPX_ERRORS = [cls for cls in vars(httpx2).values() if isinstance(cls, type) and issubclass(cls, httpx2.HTTPError)
                and cls not in (httpx2.HTTPStatusError, httpx2.HTTPError, httpx2.RequestError, httpx2.TransportError)]


@pytest.mark.parametrize("cls", HTTPX_ERRORS, ids=lambda c: c.__name__)
def test_every_transport_failure_maps_to_an_upstream_error(cls: type[Exception]) -> None:
    try:
        exc = cls("boom")
    except TypeError:
        pytest.skip(f"{cls.__name__} needs more arguments")
    error = translate("srv", ExceptionGroup("g", [exc]))
    assert isinstance(error, UpstreamUnavailable | UpstreamTimeout | UpstreamRefused), error


def test_other_failures_keep_their_type_in_the_reason() -> None:
    try:
        types.Tool.model_validate({"name": 1})
    except ValidationError as exc:
        assert "does not follow the protocol" in str(translate("srv", exc))
    assert str(translate("srv", RuntimeError("odd"))) == "upstream 'srv': RuntimeError: odd"


def test_translated_errors_never_carry_credentials() -> None:
    exc = httpx2.ConnectError("failed for http://u:SECRET-PW@h/mcp?token=SECRET-TOKEN Bearer SECRET-BEARER")
    assert "SECRET" not in str(translate("srv", exc))


# --- configured values, and words around values (issues 24, 25) ----------------------------------


@pytest.fixture
def no_known_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "_known_secrets", set())


def write_upstream(directory: Path, name: str, settings: dict[str, Any]) -> Path:
    (directory / "upstreams").mkdir(parents=True, exist_ok=True)
    (directory / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(settings))
    return directory


@pytest.mark.usefixtures("no_known_secrets")
def test_every_literal_header_and_env_value_is_redacted(tmp_path: Path) -> None:
    write_upstream(tmp_path, "remote", {"url": "https://mcp.example.com/mcp",
                                        "headers": {"X-Api-Key": "hdr-literal-0b8f3e91c4",
                                                    "Authorization": "Bearer tok.Zm9vYmFy0123",
                                                    "Accept": "application/json, text/event-stream"}})
    write_upstream(tmp_path, "local", {"command": "server", "env": {"API_TOKEN": "env-literal-77c2a9d1e5",
                                                                    "MODE": "production", "DEBUG": "1"}})
    errors.remember_secrets(load_config(tmp_path, environ={}).secrets)
    echoed = ("rejected hdr-literal-0b8f3e91c4; tok.Zm9vYmFy0123 expired; env-literal-77c2a9d1e5 unknown; "
              "running in production, DEBUG=1, Accept: application/json, text/event-stream")
    assert redact(echoed) == ("rejected [REDACTED]; [REDACTED] expired; [REDACTED] unknown; "
                              "running in production, DEBUG=1, Accept: application/json, text/event-stream")
    assert "env-literal-77c2a9d1e5" not in str(UpstreamError("local", "bad key env-literal-77c2a9d1e5"))


@pytest.mark.parametrize(
    ("value", "removed"),
    [("hdr-literal-0b8f3e91c4", True), ("abcdefghijklmnopqrstuvwxyz", True), ("s3cr3t99", True),
     ("short1", False), ("production", False), ("application/json", False), ("text/event-stream", False),
     ("keep-alive", False), ("true", False), ("12345", False)],
)
@pytest.mark.usefixtures("no_known_secrets")
def test_only_values_that_could_be_credentials_are_remembered(value: str, removed: bool) -> None:
    errors.remember_secrets({value})
    assert (redact(f"saw {value} here") == "saw [REDACTED] here") is removed


@pytest.mark.usefixtures("no_known_secrets")
def test_an_unset_variable_is_reported_in_words_not_redacted(tmp_path: Path) -> None:
    write_upstream(tmp_path, "svc", {"command": "server", "env": {"TOKEN": "${NOT_SET_VAR}"}})
    (problem,) = load_config(tmp_path, environ={}).problems
    assert str(problem).endswith(": environment variable NOT_SET_VAR is not set (used in env.TOKEN)")


@pytest.mark.parametrize("text", ["env.TOKEN: environment variable NOT_SET_VAR is not set",
                                  "missing key: value.", "auth: required"])
def test_a_word_after_a_secret_name_is_prose(text: str) -> None:
    assert redact(text) == text


def test_an_upstream_error_quotes_the_upstream_on_one_inert_line() -> None:
    forged = "boom \x1b[2J\x1b]0;PWNED\x07 over\rwritten\n1999-01-01 00:00:00,000 ERROR proxy: FORGED"
    error = UpstreamError("s", forged)
    assert str(error) == ("upstream 's': boom \\x1b[2J\\x1b]0;PWNED\\x07 over\\rwritten\\n"
                          "1999-01-01 00:00:00,000 ERROR proxy: FORGED")
    assert error.reason in str(error)
