"""Errors and redaction (SPEC §7, §8): credentials never reach logs or error text."""

from __future__ import annotations

import pytest

from proxy.errors import (
    ConfigError,
    InvalidArguments,
    OutOfScope,
    ToolbridgeError,
    ToolCallError,
    UnknownTool,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
    redact,
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
    assert issubclass(UpstreamTimeout, UpstreamError)
    assert issubclass(UpstreamError, ToolbridgeError)
    for cls in (UnknownTool, OutOfScope, InvalidArguments):
        assert issubclass(cls, ToolCallError)
    assert issubclass(ToolCallError, ToolbridgeError)


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


def test_out_of_scope_and_invalid_arguments() -> None:
    assert "not available in this session" in str(OutOfScope("git__log"))
    error = InvalidArguments("missing 'path'", "arguments.path", "required", {"type": "object"})
    assert (error.path, error.constraint, error.input_schema) == ("arguments.path", "required", {"type": "object"})
    assert str(error) == "missing 'path'"


def test_non_string_args_are_kept() -> None:
    error = ToolbridgeError("x", 42)
    assert error.args == ("x", 42)
