"""One open upstream connection (stdio, Streamable HTTP or SSE; `connection/_connect` opens it), used by the task
that supervises it.

Everything the SDK, httpx2 or the OS raise here leaves as an `UpstreamError` (see
`errors.translate`), raised `from` the original.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio
import anyio.lowlevel
from mcp import Client, MCPError, types
from mcp.shared.exceptions import NoBackChannelError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from proxy import __version__
from proxy.config import UpstreamConfig
from proxy.errors import HttpResponse, NeedsBackChannel, UpstreamTimeout, UpstreamUnavailable, translate
from proxy.protocol import (
    TASKS,
    BackChannel,
    CacheHint,
    ListKind,
    NoticeSink,
    ProgressCallback,
    ServerTraits,
    caller_meta,
    strip_server_info,
)
from proxy.upstream.connection._limits import MAX_TOOLS, hold_to_caps
from proxy.upstream.connection._relay import InFlight
from proxy.upstream.connection._schemas import OutputSchemas
from proxy.upstream.connection._task_waiting import task_call

logger = logging.getLogger(__name__)

TransportChoice = Literal["stdio", "streamable-http", "sse", "auto"]
T = TypeVar("T")
_LIST_CHANGED = (types.ToolListChangedNotification, types.PromptListChangedNotification,
                 types.ResourceListChangedNotification)

CLIENT_INFO = types.Implementation(name="toolbridge", version=__version__)
MAX_PAGES = 1000
KEEPALIVE_TIMEOUT = 10.0


# What an SDK server answers when a tool asks its 2026-07-28 client over a back channel (`NoBackChannelError`):
# the error reaches us as a code and a message only, so the message the SDK builds is what identifies it.
_NO_BACK_CHANNEL = frozenset(NoBackChannelError(method).error.message
                             for method in ("sampling/createMessage", "elicitation/create", "roots/list"))


def lacks_back_channel(exc: Exception) -> bool:
    """Whether a request failed because the server asked its client over a channel the era does not have."""
    return isinstance(exc, MCPError) and exc.code == types.INVALID_REQUEST and exc.message in _NO_BACK_CHANNEL


def filter_tools(tools: Iterable[types.Tool], include: Sequence[str], exclude: Sequence[str]) -> list[types.Tool]:
    """Apply `tools.include` / `tools.exclude` globs to the upstream's raw tool names."""

    def matches(name: str, patterns: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)

    return [
        tool for tool in tools
        if (not include or matches(tool.name, include)) and not matches(tool.name, exclude)
    ]




async def ignore_notice(server: str, notification: types.ServerNotification) -> None:
    await anyio.lowlevel.checkpoint()


@dataclass
class Signals:
    """What the supervisor must react to; set from callbacks, consumed by the supervisor only.

    Resource updates are no concern of the supervisor: they go straight to `notices`.
    """

    notices: NoticeSink = ignore_notice
    server: str = ""
    changed: bool = False
    lost: bool = False
    _wake: anyio.Event = field(default_factory=anyio.Event)

    def mark_changed(self) -> None:
        self.changed = True
        self._wake.set()

    def mark_lost(self) -> None:
        self.lost = True
        self._wake.set()

    async def wait(self, timeout: float, *, changes: bool = True) -> None:
        """Return when something was marked (or after `timeout`); re-arms for the next wait.

        With `changes=False` a pending change is held back and only a lost connection ends the wait early.
        """
        with anyio.move_on_after(timeout):
            while not (self.lost or (changes and self.changed)):
                await self._wake.wait()
                self._wake = anyio.Event()
        self._wake = anyio.Event()

    async def on_message(self, message: Any) -> None:
        """`message_handler`: legacy list_changed arrives here (modern listen frames are tee'd too)."""
        if isinstance(message, _LIST_CHANGED):
            self.mark_changed()
        elif isinstance(message, types.ResourceUpdatedNotification):
            await self.notices(self.server, message)
            return
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
    in_flight: InFlight = field(default_factory=InFlight)
    calls_in_flight: int = 0
    output_schemas: OutputSchemas = field(default_factory=OutputSchemas)
    hints: dict[ListKind, CacheHint] = field(default_factory=dict)  # of the last listing, all pages merged

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
        capabilities = self.client.server_capabilities
        return any(c is not None and c.list_changed
                   for c in (capabilities.tools, capabilities.prompts, capabilities.resources))

    @property
    def traits(self) -> ServerTraits:
        """Its advertised extensions (a 2026-era server's: the handshake era has no field for them) and
        its last lists' cache hints."""
        extensions = self.client.server_capabilities.extensions or {}
        return ServerTraits({k: v for k, v in extensions.items() if isinstance(v, dict)}, dict(self.hints))

    @property
    def makes_tasks(self) -> bool:
        """It declared the tasks extension (2026 era): its long calls become tasks toolbridge waits on."""
        return TASKS in (self.client.server_capabilities.extensions or {})

    @property
    def logs(self) -> bool:
        """Takes `logging/setLevel` (handshake era; a 2026-era request opts in through its `_meta`)."""
        return not self.modern and self.client.server_capabilities.logging is not None

    async def list_catalog(
        self,
    ) -> tuple[list[types.Resource], list[types.ResourceTemplate], list[types.Prompt]]:
        """Every page of resources, resource templates and prompts the server has capabilities for."""
        capabilities = self.client.server_capabilities
        resources: list[types.Resource] = []
        templates: list[types.ResourceTemplate] = []
        prompts: list[types.Prompt] = []
        if capabilities.resources is not None:
            resources = await self._every_page(self.client.list_resources, lambda page: page.resources, "resources")
            templates = await self._every_page(self.client.list_resource_templates,
                                               lambda page: page.resource_templates, "templates")
        if capabilities.prompts is not None:
            prompts = await self._every_page(self.client.list_prompts, lambda page: page.prompts, "prompts")
        return resources, templates, prompts

    async def _every_page(
        self, fetch: Callable[..., Awaitable[Any]], items: Callable[[Any], list[T]], kind: ListKind,
        *, most: int | None = None,
    ) -> list[T]:
        """Every page of a listing; with `most`, no page after the one that brings more than `most` items."""
        found: list[T] = []
        cursor: str | None = None
        hint: CacheHint | None = None
        for _ in range(MAX_PAGES):
            page = await fetch(cursor=cursor, cache_mode="refresh")
            found += items(page)
            hint = CacheHint.of(page) if hint is None else hint.merge(CacheHint.of(page))
            self.hints[kind] = hint
            if (cursor := page.next_cursor) is None or (most is not None and len(found) > most):
                break
        else:
            logger.warning("server %s: stopped listing after %d pages", self.server, MAX_PAGES)
        return found

    async def request(
        self, what: str, operation: Callable[[Client], Awaitable[T]], channel: BackChannel | None = None
    ) -> T:
        """Run one request (`what` names it in errors) that is not a tool call, e.g. a resource read.

        Raises:
            UpstreamError: as for `call_tool`.
        """
        seen = len(self.responses)
        try:
            async with self.in_flight.call(channel):
                return strip_server_info(await operation(self.client))
        except Exception as exc:
            error = translate(self.server, exc, responses=self.responses[seen:], during=what)
            if isinstance(error, UpstreamUnavailable):
                self.signals.mark_lost()
            raise error from exc

    async def list_tools(self) -> list[types.Tool]:
        """Every page of tools/list (up to `MAX_TOOLS` tools), held to the caps and filtered by the config's
        include/exclude globs.

        The SDK's copies of their output schemas are emptied until a call needs one (`OutputSchemas`).
        """
        tools = await self._every_page(self.client.list_tools, lambda page: page.tools, "tools", most=MAX_TOOLS)
        tools = hold_to_caps(tools, self.server)
        offered = filter_tools(tools, self.config.tools.include, self.config.tools.exclude)
        return self.output_schemas.adopt(tools, offered)

    async def keepalive(self, timeout: float = KEEPALIVE_TIMEOUT) -> None:
        """Make the cheapest round trip (see `_small_request`); raises if the peer is dead.

        "Method not found" is an answer too (a server without ping); any other error ends the
        connection (e.g. a lost session). A connection busy with a call is alive by definition: its
        answer is what we wait for, and a ping queued behind a long call would time out and kill it.
        """
        if self.calls_in_flight:
            return
        with anyio.move_on_after(timeout) as scope:
            try:
                await self._small_request()
            except MCPError as exc:
                if exc.code != types.METHOD_NOT_FOUND:
                    raise
        if scope.cancelled_caught and not self.calls_in_flight:
            raise UpstreamUnavailable(self.server, f"no answer to a keepalive within {timeout:g} s")

    async def drop_last_answer(self, timeout: float = KEEPALIVE_TIMEOUT) -> None:
        """Make the SDK let go of the last answer it received, after a listing.

        The SDK's read loop keeps the last message it received referenced until the next one
        arrives; after a listing that is the server's whole tools/list answer as parsed JSON (~6 KB
        a tool, for as long as the connection is quiet). Any small answer replaces it. Failures are
        left to the keepalive.
        """
        with anyio.move_on_after(timeout), contextlib.suppress(MCPError):
            await self._small_request()

    async def _small_request(self) -> None:
        """The cheapest request there is: ping, or `server/discover` in the 2026 era, which has no ping."""
        if self.modern:
            await self.client.session.send_discover(self.protocol_version)
        else:
            await self.client.send_ping()

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        timeout: float,
        progress_callback: ProgressCallback | None = None,
        channel: BackChannel | None = None,
    ) -> types.CallToolResult:
        """Call `name` upstream through the SDK client, which also drives 2026-era input rounds.

        Sampling, elicitation and roots requests the upstream makes meanwhile, and its log messages,
        go to `channel`; a 2026-era upstream sees the capabilities its caller declared (`caller_meta`).

        Raises:
            UpstreamTimeout: no answer within `timeout`; the upstream request was cancelled.
            SessionLost: the upstream restarted and forgot the session; the call did not run.
            UpstreamUnavailable: the connection died; the call's outcome is uncertain.
            UpstreamError: the upstream answered with an error, or an answer that breaks the protocol
                or the tool's own output schema.
        """
        seen = len(self.responses)
        self.calls_in_flight += 1
        self.output_schemas.restore(name)  # for the SDK's validation of the result
        try:
            async with self.in_flight.call(channel):
                with task_call(self.server, progress_callback, channel):  # a task the upstream makes: see `_tasks`
                    result = await self.client.call_tool(
                        name, arguments, read_timeout_seconds=timeout, progress_callback=progress_callback,
                        meta=caller_meta(channel.capabilities if channel is not None else None),
                    )
        except Exception as exc:
            if self.modern and lacks_back_channel(exc):
                raise NeedsBackChannel(self.server, f"tool {name!r} asks its client over a back channel, "
                                                    "which the 2026-07-28 era does not have") from exc
            error = translate(self.server, exc, responses=self.responses[seen:], during=f"tool {name!r}")
            if isinstance(error, UpstreamTimeout):
                error = UpstreamTimeout(self.server, f"tool {name!r} gave no answer within {timeout:g} s; cancelled")
            elif isinstance(error, UpstreamUnavailable) and not self._request_stream_failed(exc):
                self.signals.mark_lost()
            raise error from exc
        finally:
            self.calls_in_flight -= 1
        return strip_server_info(result)

    def _request_stream_failed(self, exc: Exception) -> bool:
        """Over Streamable HTTP each request has its own stream: one closing (an event over
        `max_message_bytes`) fails that call alone, and the connection lives on."""
        return (self.transport == "streamable-http" and isinstance(exc, MCPError)
                and exc.code == types.CONNECTION_CLOSED)
