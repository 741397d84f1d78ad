"""One upstream connection: stdio, Streamable HTTP or SSE, entered by the task that supervises it.

Everything the SDK, httpx2 or the OS raise here leaves as an `UpstreamError` (see
`errors.translate`), raised `from` the original.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel
import httpx2
from mcp import Client, MCPError, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from proxy import __version__
from proxy.config import UpstreamConfig
from proxy.errors import (
    HttpResponse,
    UpstreamNeedsAuth,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamUnavailable,
    rejected_by_http,
    translate,
)
from proxy.upstream._oauth import oauth_auth
from proxy.upstream._stdio import stdio_transport

logger = logging.getLogger(__name__)

TransportChoice = Literal["stdio", "streamable-http", "sse", "auto"]
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]

CLIENT_INFO = types.Implementation(name="toolbridge", version=__version__)
MAX_PAGES = 1000
KEEPALIVE_TIMEOUT = 10.0
LISTEN_RETRY_DELAY = 1.0
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def filter_tools(tools: Iterable[types.Tool], include: Sequence[str], exclude: Sequence[str]) -> list[types.Tool]:
    """Apply `tools.include` / `tools.exclude` globs to the upstream's raw tool names."""

    def matches(name: str, patterns: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)

    return [
        tool for tool in tools
        if (not include or matches(tool.name, include)) and not matches(tool.name, exclude)
    ]


def strip_server_info(result: types.CallToolResult) -> types.CallToolResult:
    """Drop the upstream's identity stamp so the proxy's own one shows downstream."""
    if not result.meta or types.SERVER_INFO_META_KEY not in result.meta:
        return result
    meta = {k: v for k, v in result.meta.items() if k != types.SERVER_INFO_META_KEY}
    return result.model_copy(update={"meta": meta or None})


@dataclass
class Signals:
    """What the supervisor must react to; set from callbacks, consumed by the supervisor only."""

    changed: bool = False
    lost: bool = False
    _wake: anyio.Event = field(default_factory=anyio.Event)

    def mark_changed(self) -> None:
        self.changed = True
        self._wake.set()

    def mark_lost(self) -> None:
        self.lost = True
        self._wake.set()

    async def wait(self, timeout: float) -> None:
        """Return when something was marked (or after `timeout`); re-arms for the next wait."""
        if not (self.changed or self.lost):
            with anyio.move_on_after(timeout):
                await self._wake.wait()
        self._wake = anyio.Event()

    async def on_message(self, message: Any) -> None:
        """`message_handler`: legacy list_changed arrives here (modern listen frames are tee'd too)."""
        if isinstance(message, types.ToolListChangedNotification):
            self.mark_changed()
        elif isinstance(message, Exception):
            logger.debug("transport reported %s", type(message).__name__)
        await anyio.lowlevel.checkpoint()


@dataclass
class Connection:
    """A live, handshaken upstream. Calls may come from any task; only the owner closes it."""

    config: UpstreamConfig
    client: Client
    transport: str
    signals: Signals
    responses: list[HttpResponse]
    calls_in_flight: int = 0

    @property
    def server(self) -> str:
        return self.config.name

    @property
    def protocol_version(self) -> str:
        return self.client.protocol_version

    @property
    def modern(self) -> bool:
        return self.client.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def announces_changes(self) -> bool:
        tools = self.client.server_capabilities.tools
        return bool(tools and tools.list_changed)

    async def list_tools(self) -> list[types.Tool]:
        """Every page of tools/list, filtered by the config's include/exclude globs."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self.client.list_tools(cursor=cursor, cache_mode="refresh")
            tools += page.tools
            if (cursor := page.next_cursor) is None:
                break
        else:
            logger.warning("server %s: stopped listing after %d pages", self.server, MAX_PAGES)
        return filter_tools(tools, self.config.tools.include, self.config.tools.exclude)

    async def keepalive(self) -> None:
        """Ping (a cheap list where ping is gone or unsupported); raises if the peer is dead.

        A connection busy with a call is alive by definition: its answer is what we wait for, and
        a ping queued behind a long call would time out and kill it.
        """
        if self.calls_in_flight:
            return
        with anyio.move_on_after(KEEPALIVE_TIMEOUT) as scope:
            if not self.modern:
                try:
                    await self.client.send_ping()
                    return
                except MCPError as exc:
                    if exc.code != types.METHOD_NOT_FOUND:
                        raise
            await self.client.list_tools(cache_mode="refresh")
        if scope.cancelled_caught and not self.calls_in_flight:
            raise UpstreamUnavailable(self.server, f"no answer to a keepalive within {KEEPALIVE_TIMEOUT:g} s")

    async def follow_changes(self) -> None:
        """Hold a modern `subscriptions/listen` stream open; its frames reach `Signals.on_message`."""
        while True:
            try:
                async with self.client.listen(tools_list_changed=True) as subscription:
                    async for _event in subscription:
                        self.signals.mark_changed()
                return
            except SubscriptionLost:
                self.signals.mark_changed()  # no replay: refetch, then listen again
                await anyio.sleep(LISTEN_RETRY_DELAY)  # a stream that keeps dropping must not spin
            except (MCPError, ListenNotSupportedError) as exc:
                logger.info("server %s: no change subscription (%s)", self.server, exc)
                return

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        timeout: float,
        progress_callback: ProgressCallback | None = None,
    ) -> types.CallToolResult:
        """Call `name` upstream through the SDK client, which also drives 2026-era input rounds.

        Raises:
            UpstreamTimeout: no answer within `timeout`; the upstream request was cancelled.
            SessionLost: the upstream restarted and forgot the session; the call did not run.
            UpstreamUnavailable: the connection died; the call's outcome is uncertain.
            UpstreamError: the upstream answered with an error, or an answer that breaks the protocol
                or the tool's own output schema.
        """
        seen = len(self.responses)
        self.calls_in_flight += 1
        try:
            result = await self.client.call_tool(
                name, arguments, read_timeout_seconds=timeout, progress_callback=progress_callback
            )
        except Exception as exc:
            error = translate(self.server, exc, responses=self.responses[seen:], during=f"tool {name!r}")
            if isinstance(error, UpstreamTimeout):
                error = UpstreamTimeout(self.server, f"tool {name!r} gave no answer within {timeout:g} s; cancelled")
            elif isinstance(error, UpstreamUnavailable):
                self.signals.mark_lost()
            raise error from exc
        finally:
            self.calls_in_flight -= 1
        return strip_server_info(result)


# --- opening a connection ------------------------------------------------------------------------


def _http_client(config: UpstreamConfig, responses: list[HttpResponse], **overrides: Any) -> httpx2.AsyncClient:
    """Our own httpx2 client: the config's headers, its auth (OAuth), and a record of responses to
    explain failures."""

    async def record(response: httpx2.Response) -> None:
        responses.append((response.status_code, response.headers.get("content-type", "").lower()))
        del responses[:-64]

    options: dict[str, Any] = {"headers": dict(config.headers), "timeout": _HTTP_TIMEOUT}
    options.update({k: v for k, v in overrides.items() if v is not None})
    return httpx2.AsyncClient(**options, event_hooks={"response": [record]})


def _sse(config: UpstreamConfig, responses: list[HttpResponse], auth: httpx2.Auth | None) -> Any:
    def factory(headers: Any = None, timeout: Any = None, auth: Any = None) -> httpx2.AsyncClient:
        return _http_client(config, responses, headers=headers, timeout=timeout, auth=auth)

    assert config.url is not None
    return sse_client(config.url, headers=dict(config.headers), httpx_client_factory=factory, auth=auth)


async def _enter(stack: AsyncExitStack, transport: Any, signals: Signals, mode: str) -> Client:
    client = Client(transport, mode=mode, message_handler=signals.on_message, client_info=CLIENT_INFO, cache=None)
    return await stack.enter_async_context(client)


async def _open_http(
    stack: AsyncExitStack, config: UpstreamConfig, transport: TransportChoice, signals: Signals,
    mode: str, responses: list[HttpResponse], auth: httpx2.Auth | None,
) -> tuple[Client, str]:
    assert config.url is not None
    if transport != "sse":
        try:
            async with AsyncExitStack() as attempt:
                http = await attempt.enter_async_context(_http_client(config, responses, auth=auth))
                client = await _enter(attempt, streamable_http_client(config.url, http_client=http), signals, mode)
                await stack.enter_async_context(attempt.pop_all())
                return client, "streamable-http"
        except Exception as exc:
            if transport != "auto" or rejected_by_http(responses) is None or isinstance(
                translate(config.name, exc), UpstreamNeedsAuth
            ):
                raise
            logger.info("server %s: Streamable HTTP rejected; trying SSE", config.name)
            responses.clear()
    return await _enter(stack, _sse(config, responses, auth), signals, mode), "sse"


@asynccontextmanager
async def _stdio(config: UpstreamConfig, config_dir: Path, log_dir: Path, signals: Signals) -> AsyncIterator[Any]:
    """The child's stderr is appended to `<log_dir>/<server>.log`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{config.name}.log", "a", encoding="utf-8") as errlog:
        errlog.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {config.command}\n")
        errlog.flush()
        async with stdio_transport(config, config_dir, errlog, signals.mark_lost) as streams:
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
) -> AsyncIterator[Connection]:
    """Spawn or dial the upstream and negotiate; closing it stops the child's whole group.

    `transport="auto"` tries Streamable HTTP and falls back to SSE when the endpoint rejects it;
    `Connection.transport` says which one worked. An `auth: oauth` upstream authenticates with
    `auth`, by default the serving one (`oauth_auth`), which never waits for a person.

    Raises:
        UpstreamNeedsAuth: an OAuth upstream needs the user's consent (`toolbridge login`).
        UpstreamRefused: retrying will not help (missing command, auth, not an MCP endpoint).
        UpstreamError: any other failure to connect, or the connection failing while open.
    """
    signals = Signals()
    responses: list[HttpResponse] = []
    opened = False
    try:
        async with AsyncExitStack() as stack:
            if config.is_stdio:
                client = await _enter(stack, _stdio(config, config_dir, log_dir, signals), signals, mode)
                used = "stdio"
            else:
                if auth is None and config.auth is not None:
                    auth = oauth_auth(config, config_dir)
                client, used = await _open_http(stack, config, transport, signals, mode, responses, auth)
            opened = True
            yield Connection(config, client, used, signals, responses)
    except Exception as exc:
        error = translate(config.name, exc, responses=responses, connecting=not opened)
        if not opened and config.is_stdio and signals.lost and not isinstance(error, UpstreamRefused):
            error = UpstreamUnavailable(config.name, f"the process exited during startup; see {log_dir}/"
                                                     f"{config.name}.log")
        raise error from exc
