"""Errors toolbridge raises, as one tree, and the one place foreign errors are translated into it.

    ToolbridgeError
    ├── ConfigError(path, reason, line)      one config file is unusable; the others still load
    │   └── DanglingName                     a file loaded but names a toolset or server that does not exist
    ├── UpstreamError(server, reason)        an upstream answered with an error
    │   ├── UpstreamUnavailable              not connected, or the connection died
    │   │   ├── UpstreamRefused              retrying soon will not help (command, credentials, not MCP)
    │   │   │   ├── UpstreamNeedsAuth        an OAuth upstream waits for the user's consent (`toolbridge login`)
    │   │   │   └── AuthorizationFailed      the OAuth flow itself failed (e.g. an `iss` from another issuer)
    │   │   └── SessionLost                  the upstream restarted and forgot us; the request never ran
    │   ├── NeedsBackChannel                 it asked its client mid-call over a channel 2026-07-28 lacks
    │   ├── MissingCapability                the caller did not declare a capability the request needs (-32021)
    │   └── UpstreamTimeout                  no answer within the configured time
    └── ToolCallError                        a call refused before it reached any upstream
        ├── BridgeError                      a malformed bridge call (wrong types, too many names)
        ├── UnknownTool(name, suggestions)   no such tool, or one outside the session's scope: the same answer
        ├── DeferredTool(name)               called directly, but only `tool_call` reaches it
        ├── LimitReached(limit, allows, retry_after)  a `limits:` entry allows no more calls now
        └── InvalidArguments(message, path, constraint, input_schema)

`str()` of any of them is safe to show a user: string arguments are redacted on the way in, and
what an upstream said is quoted escaped (`proxy.text.escape`: one line, no control characters).

`translate()` maps what the SDK, httpx2 and the OS raise to the most specific `UpstreamError`,
keyed on exception types, JSON-RPC error codes and the HTTP responses seen, never on message text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import httpx2
from mcp import MCPError, types
from mcp.client.auth import OAuthFlowError
from pydantic import ValidationError

from proxy.text import escape

__all__ = [
    "AuthorizationFailed",
    "BridgeError",
    "ConfigError",
    "DanglingName",
    "DeferredTool",
    "HttpResponse",
    "InvalidArguments",
    "LimitReached",
    "MissingCapability",
    "NeedsBackChannel",
    "SessionLost",
    "ToolCallError",
    "ToolbridgeError",
    "UnknownTool",
    "UpstreamError",
    "UpstreamNeedsAuth",
    "UpstreamRefused",
    "UpstreamTimeout",
    "UpstreamUnavailable",
    "describe",
    "redact",
    "remember_secrets",
    "translate",
]


class ToolbridgeError(Exception):
    """Base class of every error toolbridge raises on purpose.

    String arguments are redacted on the way in, so neither `str()` nor `repr()` can echo a
    credential, whichever subclass built the message.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(arg) if isinstance(arg, str) else arg for arg in args))


class ConfigError(ToolbridgeError):
    """One config file is unusable; the others still load."""

    def __init__(self, path: str, reason: str, line: int | None = None, mistakes: int = 1) -> None:
        self.path = path
        self.reason = redact(reason)
        self.line = line
        self.mistakes = mistakes  # one file's invalid fields are one problem, each still a mistake to count
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {self.reason}")


class DanglingName(ConfigError):
    """A file loaded, but one of its names resolves to nothing (a typo that would empty a profile)."""


class UpstreamError(ToolbridgeError):
    """An upstream server failed; the message names the server, never a credential.

    `code` is the JSON-RPC error code the upstream answered with, when it answered with one.
    """

    code: int | None = None

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = escape(redact(reason))
        super().__init__(f"upstream '{server}': {self.reason}")


class UpstreamUnavailable(UpstreamError):
    """The upstream is not connected (starting, restarting, parked, or died mid-call)."""


class UpstreamRefused(UpstreamUnavailable):
    """A failure retrying will not fix soon: missing command, rejected credentials, not MCP."""


class UpstreamNeedsAuth(UpstreamRefused):
    """An OAuth upstream has no usable token and needs the user's consent, which only a person can give."""

    def __init__(self, server: str) -> None:
        super().__init__(server, f"needs authorization; run `toolbridge login {server}`")


class AuthorizationFailed(UpstreamRefused):
    """The OAuth flow with the upstream's authorization server failed; its reason says how."""


class SessionLost(UpstreamUnavailable):
    """The upstream no longer knows our session (it restarted); the request never ran."""


class NeedsBackChannel(UpstreamError):
    """On a 2026-07-28 connection, the server asked its client for sampling, elicitation or roots as a
    request of its own, which that era has no channel for (it failed there); the handshake era has one."""


class MissingCapability(UpstreamError):
    """The upstream refused a request (-32021) whose caller did not declare a capability it needs; `required`
    names them as the spec's `ClientCapabilities` object (e.g. `{"sampling": {}}`), read through that model."""

    required: dict[str, Any]

    def __init__(self, server: str, reason: str, data: Any) -> None:
        super().__init__(server, reason)
        self.code = types.MISSING_REQUIRED_CLIENT_CAPABILITY
        required = data.get("requiredCapabilities") if isinstance(data, dict) else None
        try:
            self.required = types.ClientCapabilities.model_validate(required or {}).model_dump(
                by_alias=True, mode="json", exclude_none=True)
        except ValidationError:
            self.required = {}


class UpstreamTimeout(UpstreamError):
    """The upstream did not answer within its configured timeout."""


class ToolCallError(ToolbridgeError):
    """A tool call that was refused before it reached any upstream."""


class BridgeError(ToolCallError):
    """A bridge call was malformed (wrong argument types, too many names)."""


class UnknownTool(ToolCallError):
    """`searchable` is False when the session's list has no `tool_search` to point to."""

    def __init__(self, name: str, suggestions: list[str], *, searchable: bool = True) -> None:
        self.name = name
        self.suggestions = suggestions
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        where = "Use tool_search to find tools." if searchable else "List the tools again (tools/list)."
        super().__init__(f"Unknown tool '{name}'.{hint} {where}")


class DeferredTool(ToolCallError):
    """A deferred tool called by its own name: it exists, so "unknown" would send the model astray."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"'{name}' is a deferred tool: call it through tool_call with "
                         f'{{"name": "{name}", "arguments": {{...}}}} (tool_describe gives its schema).')


class LimitReached(ToolCallError):
    """A `limits:` entry allows this caller no more calls now: `retry_after` seconds for a calls-per-minute
    limit, None for a concurrency limit (a slot comes back when one of the caller's calls finishes)."""

    def __init__(self, limit: str, allows: str, retry_after: float | None) -> None:
        self.limit = limit
        self.retry_after = retry_after
        when = ("retry once one of them has finished" if retry_after is None
                else f"retry in {max(1, math.ceil(retry_after))} s")
        super().__init__(f"limit '{limit}' reached ({allows}); {when}")


class InvalidArguments(ToolCallError):
    """Arguments failed validation; carries what the model needs to fix the call."""

    def __init__(self, message: str, path: str, constraint: str, input_schema: dict[str, Any]) -> None:
        self.path = path
        self.constraint = constraint
        self.input_schema = input_schema
        super().__init__(message)


# --- translation ---------------------------------------------------------------------------------

HttpResponse = tuple[int, str]
"""(status, content type) of one HTTP response an upstream connection received."""

AUTH_STATUSES = (401, 403)
REJECT_STATUSES = (400, 404, 405, 406, 415)
_MCP_CONTENT_TYPES = ("application/json", "text/event-stream")

# What each JSON-RPC error code means when an upstream answers with it (connection-level codes
# first); codes not listed are the upstream's own protocol errors.
_CODES: dict[int, tuple[type[UpstreamError], str]] = {
    types.CONNECTION_CLOSED: (UpstreamUnavailable, "connection closed"),
    types.REQUEST_TIMEOUT: (UpstreamTimeout, "request timed out"),
    types.UNSUPPORTED_PROTOCOL_VERSION: (UpstreamRefused, "no protocol version in common"),
    types.MISSING_REQUIRED_CLIENT_CAPABILITY: (UpstreamError, "needs a client capability the caller did not declare"),
    types.HEADER_MISMATCH: (UpstreamError, "request headers did not match the tool's listing"),
    types.URL_ELICITATION_REQUIRED: (UpstreamError, "the user must open a URL first"),
    types.PARSE_ERROR: (UpstreamError, "could not parse our request"),
    types.INVALID_REQUEST: (UpstreamError, "invalid request"),
    types.METHOD_NOT_FOUND: (UpstreamError, "method not supported"),
    types.INVALID_PARAMS: (UpstreamError, "invalid parameters"),
    types.INTERNAL_ERROR: (UpstreamError, "internal error"),
}


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _primary(exc: BaseException) -> BaseException:
    """The most telling leaf of a (possibly grouped) failure: transport errors beat the rest."""
    leaves = _leaves(exc)
    for kind in (UpstreamError, OAuthFlowError, httpx2.HTTPError, OSError, MCPError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0]


def describe(exc: BaseException) -> str:
    """`Type: message`, or the type alone when the message is empty (`TimeoutError()` says nothing)."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def rejected_by_http(responses: Sequence[HttpResponse]) -> str | None:
    """Why an endpoint is not a Streamable HTTP MCP endpoint, judged by its responses, or None."""
    for status, content_type in responses:
        if status in AUTH_STATUSES:
            return f"authentication failed (HTTP {status}); check its credentials"
        if status in REJECT_STATUSES:
            return f"not an MCP endpoint (HTTP {status})"
        if 200 <= status < 300 and status != 202 and not content_type.startswith(_MCP_CONTENT_TYPES):
            return f"not an MCP endpoint (answered {content_type or 'no content type'})"
    return None


SHOWN_OAUTH_REASON = 300  # characters; the reason can quote the authorization server's own text


def translate(
    server: str,
    exc: BaseException,
    *,
    responses: Sequence[HttpResponse] = (),
    connecting: bool = False,
    during: str | None = None,
) -> UpstreamError:
    """Map a failure talking to `server` to the most specific `UpstreamError`.

    `responses` are the HTTP responses seen (an HTTP upstream); `connecting` says the failure came
    before the handshake finished, when those responses explain it; `during` names the request
    ("tool 'x'") for the message.
    """
    leaf = _primary(exc)
    if isinstance(leaf, UpstreamError):
        return leaf
    if isinstance(leaf, OAuthFlowError):  # its 401 says less than the flow's own reason
        return AuthorizationFailed(server, f"authorization failed: {str(leaf)[:SHOWN_OAUTH_REASON]}")
    if connecting and (why := rejected_by_http(responses)) is not None:
        return UpstreamRefused(server, why)
    what = f"{during}: " if during else ""
    if isinstance(leaf, MCPError):
        return _translate_code(server, leaf, responses, what)
    if isinstance(leaf, httpx2.SSEError):  # once connected, the stream broke (an event over the limit)
        if connecting:
            return UpstreamRefused(server, "not an MCP endpoint (no SSE event stream)")
        return UpstreamUnavailable(server, f"{what}the event stream failed ({describe(leaf)})")
    if isinstance(leaf, httpx2.HTTPStatusError):
        status = leaf.response.status_code
        if 400 <= status < 500 and status not in (408, 429):
            return UpstreamRefused(server, f"not an MCP endpoint (HTTP {status})")
        return UpstreamUnavailable(server, f"{what}HTTP {status}")
    if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
        return UpstreamTimeout(server, f"{what}timed out ({describe(leaf)})")
    if isinstance(leaf, httpx2.HTTPError):
        return UpstreamUnavailable(server, f"{what}cannot reach the server ({describe(leaf)})")
    if isinstance(leaf, OSError):
        return UpstreamUnavailable(server, f"{what}{type(leaf).__name__}: {leaf.strerror or leaf}")
    if isinstance(leaf, ValidationError):
        return UpstreamError(server, f"{what}the answer does not follow the protocol ({leaf.error_count()} errors)")
    return UpstreamError(server, f"{what}{describe(leaf)}")


def _translate_code(server: str, exc: MCPError, responses: Sequence[HttpResponse], what: str) -> UpstreamError:
    if exc.code == types.INVALID_REQUEST and responses and responses[-1][0] == 404:
        return SessionLost(server, f"{what}the server restarted and lost the session")
    if exc.code == types.CONNECTION_CLOSED and what:
        return UpstreamUnavailable(
            server, f"connection lost during {what[:-2]}; the outcome of the call is uncertain ({exc.message})"
        )
    kind, meaning = _CODES.get(exc.code, (UpstreamError, "error"))
    reason = f"{what}{meaning} (code {exc.code}: {exc.message})"
    if exc.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
        return MissingCapability(server, reason, exc.data)
    error = kind(server, reason)
    error.code = exc.code
    return error


# --- redaction -----------------------------------------------------------------------------------

_REDACTED = "[REDACTED]"
_SECRET_PATTERNS = [
    # An Authorization header value, whatever its scheme (Bearer, Basic, Token, a bare key).
    (
        re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[=:]\s*[\"']?)(?:(bearer|basic|token|digest)\s+)?"
                   r"[^\s\"',;&]+"),
        lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}{_REDACTED}",
    ),
    # A scheme and a credential (one with a digit or punctuation: "a basic command" is prose).
    (re.compile(r"(?i)\b(bearer|basic)\s+(?!\[REDACTED\])(?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]+"),
     rf"\1 {_REDACTED}"),
    # `key=value`, `key: value`, `"key": "value"`, for any name ending in a secret-ish word that
    # starts a word part (OPENAI_API_KEY=, client_secret=, apiKey:, refresh_token:), not "monkey:".
    # After `key: ` a lowercase word is prose, not a value ("env.TOKEN: environment variable X is not set").
    (
        re.compile(
            r"\b([A-Za-z0-9_.-]*?(?:(?<![A-Za-z])(?i:api_?key|key|token|secret|password|passwd|pwd|auth"
            r"|credentials?)|Key|Token|Secret|Password|Auth|Credentials?))"
            r"([\"']?\s*[=:]\s*)(?!\[REDACTED\])(?!(?<=:\s)[a-z]+[.!?:]?(?![^\s&,;\"'}\]]))"
            r"(\"[^\"]*\"|'[^']*'|[^\s&,;\"'}\]]+)"
        ),
        rf"\1\2{_REDACTED}",
    ),
    # URL userinfo: scheme://user:password@host (the user may be empty).
    (re.compile(r"(?i)(://[^/\s:@]*:)[^@\s/]+@"), rf"\1{_REDACTED}@"),
]


# Values a config holds that may be credentials: every header and environment value (literal or
# `${VAR}`), the OAuth client secret, and whatever was interpolated from the environment (a token
# may sit in `command`, `args` or `cwd`, where no pattern can recognise it). Each is removed
# wherever it appears, and so is each space-separated part of it ("Bearer <token>": the token).
# Removing an ordinary value would mangle every message that happens to contain it ("1", "true",
# "production", "application/json"), so only a value that could be a credential is kept: at least
# `_MIN_SECRET_LENGTH` characters, and not plain words (letters in runs of at most
# `_MAX_WORD_LENGTH`, joined by spaces or `/ . , ; = _ -`, without a digit). Random tokens of that
# length nearly always hold a digit or a longer run of letters.
_MIN_SECRET_LENGTH = 8
_MAX_WORD_LENGTH = 12
_WORD, _JOINER = rf"[A-Za-z]{{1,{_MAX_WORD_LENGTH}}}", "[ /.,;=_-]"
_PLAIN_WORDS = re.compile(rf"{_JOINER}*{_WORD}(?:{_JOINER}+{_WORD})*{_JOINER}*")
_known_secrets: set[str] = set()


def could_be_secret(value: str) -> bool:
    """Whether `redact` removes this configured value (see the rule above)."""
    return len(value) >= _MIN_SECRET_LENGTH and _PLAIN_WORDS.fullmatch(value) is None


def remember_secrets(values: set[str]) -> None:
    """Have `redact` remove these exact strings from now on (process-wide: logs, status, errors)."""
    for value in values:
        _known_secrets.update(part for part in {value, *value.split()} if could_be_secret(part))


def redact(text: str) -> str:
    """Remove credentials (bearer tokens, key=/token=/password= values, URL passwords, known secrets).

    Only values go, never the words around them.
    """
    for secret in sorted(_known_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, _REDACTED)
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text
