"""Opening one upstream connection: spawning a stdio child or dialling Streamable HTTP (or SSE).

Everything the SDK, httpx2 or the OS raise while connecting leaves as an `UpstreamError` (see
`errors.translate`), raised `from` the original.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from proxy.config import UpstreamConfig
from proxy.errors import (
    AuthorizationFailed,
    HttpResponse,
    UpstreamNeedsAuth,
    UpstreamRefused,
    UpstreamUnavailable,
    rejected_by_http,
    translate,
)
from proxy.protocol import NoticeSink, client_extensions
from proxy.text import clean
from proxy.upstream.connection._carried_capabilities import carrying_capabilities
from proxy.upstream.connection._client import CLIENT_INFO, Connection, Signals, TransportChoice, ignore_notice
from proxy.upstream.connection._listen_framing import frame_listen_stream
from proxy.upstream.connection._relay import InFlight, client_callbacks
from proxy.upstream.connection._result_types import completed_results
from proxy.upstream.connection._sse import sse_transport
from proxy.upstream.connection._stdio import stdio_transport
from proxy.upstream.connection._task_waiting import TasksExtension

logger = logging.getLogger(__name__)

_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def _http_client(config: UpstreamConfig, responses: list[HttpResponse], **overrides: Any) -> httpx2.AsyncClient:
    """Our own httpx2 client: the config's headers, its auth (OAuth), a record of responses to explain
    failures, and listen streams read whatever their framing (`_listen_framing`)."""

    async def record(response: httpx2.Response) -> None:
        responses.append((response.status_code, response.headers.get("content-type", "").lower()))
        del responses[:-64]

    options: dict[str, Any] = {"headers": dict(config.headers), "timeout": _HTTP_TIMEOUT}
    options.update({k: v for k, v in overrides.items() if v is not None})
    hooks = [record, frame_listen_stream(config.max_message_bytes)]
    return httpx2.AsyncClient(**options, event_hooks={"response": hooks})


@dataclass(frozen=True)
class _Hooks:
    """What every `Client` of one connection is built with, whichever transport wins."""

    signals: Signals
    callbacks: dict[str, Any]
    mode: str


async def _enter(stack: AsyncExitStack, transport: Any, hooks: _Hooks) -> Client:
    # log_level opts every request of a 2026-era connection into log messages (each session's own
    # level filters them downstream); a handshake-era connection ignores it.
    # Each request carries its caller's capabilities (`carrying_capabilities`); each result has a resultType.
    client = Client(carrying_capabilities(completed_results(transport)), mode=hooks.mode,
                    message_handler=hooks.signals.on_message, client_info=CLIENT_INFO, cache=None, log_level="debug",
                    extensions=[*client_extensions(), TasksExtension()], **hooks.callbacks)
    await stack.enter_async_context(client)
    if hooks.mode not in ("auto", "legacy"):
        # A pinned version is adopted without a word to the server, with no capabilities at all (no
        # resources, prompts or listen stream would be used): ask for the server's own, as `auto` does.
        raw = await client.session.send_discover(hooks.mode)
        client.session.adopt(types.DiscoverResult.model_validate(raw))
    return client


async def _open_http(
    stack: AsyncExitStack, config: UpstreamConfig, transport: TransportChoice, hooks: _Hooks,
    responses: list[HttpResponse], auth: httpx2.Auth | None,
) -> tuple[Client, str]:
    assert config.url is not None
    if transport != "sse":
        try:
            async with AsyncExitStack() as attempt:
                http = await attempt.enter_async_context(_http_client(config, responses, auth=auth))
                stream = streamable_http_client(config.url, http_client=http,
                                                max_sse_event_size=config.max_message_bytes)
                client = await _enter(attempt, stream, hooks)
                await stack.enter_async_context(attempt.pop_all())
                return client, "streamable-http"
        except Exception as exc:
            if transport != "auto" or rejected_by_http(responses) is None or isinstance(
                translate(config.name, exc), UpstreamNeedsAuth | AuthorizationFailed
            ):
                raise
            logger.info("server %s: Streamable HTTP rejected; trying SSE", config.name)
            responses.clear()
    http = await stack.enter_async_context(_http_client(config, responses, auth=auth))
    sse = sse_transport(http, config.url, config.name, config.max_message_bytes)
    return await _enter(stack, sse, hooks), "sse"


def _owner_only(path: str, flags: int) -> int:
    descriptor = os.open(path, flags, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # a file made before, readable by all
    except OSError:
        os.close(descriptor)
        raise
    return descriptor


_WORD = re.compile(r"[^\W\d_]{2,}")
_ERROR = re.compile(r"(?i)\b(error|exception|fatal|panic|denied|refused|not found|no such|cannot|can't|failed|"
                    r"missing|invalid|unauthori[sz]ed|forbidden|[A-Z]\w*(Error|Exception))\b")
_TAIL_BYTES = 4096
_SHOWN_LINE = 200


def telling_line(tail: str) -> str | None:
    """The line of this run's stderr (after our last `--- … starting` marker) that says why it died: the last
    one that reads as an error (a traceback's last line, `Error:`, `fatal`…), else the last with a word in it,
    so a closing `}` of a dumped object or a blank-ish line is never what the operator is shown."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    run = lines[max((i + 1 for i, line in enumerate(lines) if line.startswith("--- ")), default=0):]
    worded = [line for line in run if _WORD.search(line)]
    errors = [line for line in worded if _ERROR.search(line)]
    return (errors or worded or [None])[-1]


def _exited_during_startup(log: Path) -> str:
    """Why a stdio server died at start, in its own words (`telling_line` of what it wrote to stderr)."""
    try:
        with open(log, "rb") as file:
            file.seek(max(0, file.seek(0, 2) - _TAIL_BYTES))
            tail = file.read().decode("utf-8", "replace")
    except OSError:
        tail = ""
    line = telling_line(tail)
    said = f": {clean(line)[:_SHOWN_LINE]}" if line else " (it wrote nothing to stderr)"
    return f"the process exited during startup{said}; see {log}"


@asynccontextmanager
async def _stdio(config: UpstreamConfig, config_dir: Path, log_dir: Path, signals: Signals) -> AsyncIterator[Any]:
    """The child's stderr is appended to `<log_dir>/<server>.log`, readable by the owner only (it may
    print its credentials), also when an older file was readable by all."""
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(log_dir / f"{config.name}.log", "a", encoding="utf-8", opener=_owner_only) as errlog:
        errlog.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {config.command}\n")
        errlog.flush()
        async with stdio_transport(config, config_dir, errlog, signals.mark_changed, signals.mark_lost) as streams:
            yield streams


@asynccontextmanager
async def connect(
    config: UpstreamConfig,
    *,
    config_dir: Path,
    log_dir: Path,
    transport: TransportChoice = "auto",
    mode: str = "auto",
    auth: httpx2.Auth | None = None,
    notices: NoticeSink | None = None,
) -> AsyncIterator[Connection]:
    """Spawn or dial the upstream and negotiate; closing it stops the child's whole group.

    `transport="auto"` tries Streamable HTTP and falls back to SSE when the endpoint rejects it;
    `Connection.transport` says which one worked. Resource updates and log messages that concern
    no call in flight go to `notices`. An `auth: oauth` upstream authenticates with `auth` (see
    `oauth_auth`).

    Raises:
        UpstreamNeedsAuth: an OAuth upstream needs the user's consent (`toolbridge login`).
        UpstreamRefused: retrying will not help (missing command, auth, not an MCP endpoint).
        UpstreamError: any other failure to connect, or the connection failing while open.
    """
    signals = Signals(notices=notices or ignore_notice, server=config.name)
    responses: list[HttpResponse] = []
    in_flight = InFlight()
    hooks = _Hooks(signals, client_callbacks(config.name, in_flight, signals.notices), mode)
    opened = False
    try:
        async with AsyncExitStack() as stack:
            if config.is_stdio:
                client = await _enter(stack, _stdio(config, config_dir, log_dir, signals), hooks)
                used = "stdio"
            else:
                client, used = await _open_http(stack, config, transport, hooks, responses, auth)
            opened = True
            yield Connection(config, client, used, signals, responses, in_flight)
    except Exception as exc:
        error = translate(config.name, exc, responses=responses, connecting=not opened)
        if not opened and config.is_stdio and signals.lost and not isinstance(error, UpstreamRefused):
            error = UpstreamUnavailable(config.name, _exited_during_startup(log_dir / f"{config.name}.log"))
        raise error from exc
