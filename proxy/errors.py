"""Errors toolbridge raises, as one small tree.

    ToolbridgeError
    ├── ConfigError(path, line, reason)
    ├── UpstreamError(server, reason)
    │   ├── UpstreamUnavailable
    │   └── UpstreamTimeout
    └── ToolCallError
        ├── UnknownTool
        ├── OutOfScope
        └── InvalidArguments

`str()` of any of them is safe to show a user: messages are redacted where they are built.
"""

from __future__ import annotations

import re
from typing import Any


class ToolbridgeError(Exception):
    """Base class of every error toolbridge raises on purpose.

    String arguments are redacted on the way in, so neither `str()` nor `repr()` can echo a
    credential, whichever subclass built the message.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(arg) if isinstance(arg, str) else arg for arg in args))


class ConfigError(ToolbridgeError):
    """One config file is unusable; the others still load."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path = path
        self.reason = redact(reason)
        self.line = line
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {self.reason}")


class UpstreamError(ToolbridgeError):
    """An upstream server failed; the message names the server, never a credential."""

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = redact(reason)
        super().__init__(f"upstream '{server}': {self.reason}")


class UpstreamUnavailable(UpstreamError):
    """The upstream is not connected (starting, restarting, parked, or died mid-call)."""


class UpstreamTimeout(UpstreamError):
    """The upstream did not answer within its configured timeout."""


class ToolCallError(ToolbridgeError):
    """A `tool_call` that was refused before it reached any upstream."""


class UnknownTool(ToolCallError):
    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"Unknown tool '{name}'.{hint} Use tool_search to find tools.")


class OutOfScope(ToolCallError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"Tool '{name}' is not available in this session.")


class InvalidArguments(ToolCallError):
    """Arguments failed validation; carries what the model needs to fix the call."""

    def __init__(self, message: str, path: str, constraint: str, input_schema: dict[str, Any]) -> None:
        self.path = path
        self.constraint = constraint
        self.input_schema = input_schema
        super().__init__(message)


_REDACTED = "[REDACTED]"
_SECRET_PATTERNS = [
    # An Authorization header value, whatever its scheme (Bearer, Basic, Token, a bare key).
    (
        re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[=:]\s*[\"']?)(?:(bearer|basic|token|digest)\s+)?"
                   r"[^\s\"',;&]+"),
        lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}{_REDACTED}",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=-]+"), rf"\1 {_REDACTED}"),
    # `key=value`, `key: value`, `"key": "value"`, for any name ending in a secret-ish word:
    # OPENAI_API_KEY=, client_secret=, refresh_token: ...
    (
        re.compile(
            r"(?i)\b([A-Za-z0-9_.-]*?(?:key|token|secret|password|passwd|pwd|auth|credentials?))"
            r"([\"']?\s*[=:]\s*)(?!\[REDACTED\])(\"[^\"]*\"|'[^']*'|[^\s&,;\"'}\]]+)"
        ),
        rf"\1\2{_REDACTED}",
    ),
    # URL userinfo: scheme://user:password@host (the user may be empty).
    (re.compile(r"(?i)(://[^/\s:@]*:)[^@\s/]+@"), rf"\1{_REDACTED}@"),
]


def redact(text: str) -> str:
    """Remove credentials (bearer tokens, key=/token=/password= values, URL passwords) from text."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text
