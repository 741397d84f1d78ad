"""The downstream MCP server: one lowlevel SDK `Server` in front of the whole fleet.

`tools/list` is computed per session from its profile. Sessions are told
`notifications/tools/list_changed` when, and only when, the list they would get now differs from
the last one they got: handshake-era clients on their connection, 2026-era clients on their
`subscriptions/listen` stream.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS

from proxy import __version__
from proxy.downstream import _bridge as bridge
from proxy.errors import InvalidArguments, ToolbridgeError, UnknownTool, redact
from proxy.registry import ToolEntry
from proxy.upstream import ProgressCallback
from proxy.views import SessionView, Views

logger = logging.getLogger(__name__)

PROFILE_SCOPE_KEY = "toolbridge.profile"
_COALESCE_SECONDS = 0.05
_MAX_TRACKED_SESSIONS = 4096
_NOTIFY_TIMEOUT = 5.0

RequestContext = ServerRequestContext[Any, Any]


class ToolCaller(Protocol):
    """What the server needs from the fleet to call an upstream tool."""

    async def call_tool(
        self,
        server: str,
        raw_name: str,
        arguments: dict[str, Any],
        progress_callback: ProgressCallback | None = None,
    ) -> types.CallToolResult: ...


class _Connection:
    """Identity of one stdio or in-memory connection: `Server.run()` enters the lifespan once per
    connection on those transports, so the object it yields is the connection's own."""


def session_key(ctx: RequestContext) -> Hashable | None:
    """A public handle on the session: its `Mcp-Session-Id` over HTTP, its connection otherwise."""
    if ctx.request is not None:
        return ctx.request.headers.get("mcp-session-id")
    return ctx.lifespan_context


def _client_name(ctx: RequestContext) -> str | None:
    params = ctx.session.client_params
    return params.client_info.name if params is not None and params.client_info is not None else None


def _text_result(payload: Any, *, is_error: bool = False) -> types.CallToolResult:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


@dataclass
class _Subscriber:
    """A session and the fingerprint of the last list it was given or told of."""

    profile: str
    fingerprint: str
    notify: Callable[[], Awaitable[None]]


class ChangeNotifier:
    """Tells each session when its `tools/list` has changed: once per change, never when it has not.

    Handshake-era sessions are told on their connection, 2026-era sessions on their listen stream;
    both are subscribers here, so one pass after each (coalesced) registry change covers everyone.
    """

    def __init__(self, views: Views) -> None:
        self.views = views
        self.announced = views.registry.generation
        self._subscribers: OrderedDict[Hashable, _Subscriber] = OrderedDict()
        self._pass_done = anyio.Event()

    def remember(self, key: Hashable, view: SessionView, notify: Callable[[], Awaitable[None]]) -> None:
        self._subscribers[key] = _Subscriber(view.profile, view.fingerprint, notify)
        self._subscribers.move_to_end(key)
        while len(self._subscribers) > _MAX_TRACKED_SESSIONS:
            self._subscribers.popitem(last=False)

    def forget(self, key: Hashable) -> None:
        self._subscribers.pop(key, None)

    async def wait_announced(self, generation: int) -> None:
        """Return once every change up to `generation` has been announced to whom it concerns."""
        while self.announced < generation:
            await self._pass_done.wait()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Notify the sessions whose list changed, after every change, until cancelled."""
        registry = self.views.registry
        task_status.started()
        while True:
            await registry.wait_for_change(self.announced)
            await anyio.sleep(_COALESCE_SECONDS)  # a burst of changes becomes one announcement
            generation = registry.generation
            for key, subscriber in list(self._subscribers.items()):
                fingerprint = self.views.for_profile(subscriber.profile).fingerprint
                if fingerprint != subscriber.fingerprint:
                    subscriber.fingerprint = fingerprint
                    if not await self._notify(subscriber):
                        self.forget(key)
            self.announced = generation
            self._pass_done.set()
            self._pass_done = anyio.Event()

    @staticmethod
    async def _notify(subscriber: _Subscriber) -> bool:
        """Send one list_changed; a connection that fails or stalls is forgotten, never waited on."""
        with anyio.move_on_after(_NOTIFY_TIMEOUT):
            try:
                await subscriber.notify()
            except Exception as exc:  # a dead connection must not stop the others' notifications
                logger.debug("dropping a session whose connection failed: %s", exc)
                return False
            return True
        return False


class Handlers:
    """How each downstream request is answered, from the session's view of the catalog."""

    def __init__(
        self,
        views: Views,
        caller: ToolCaller,
        notifier: ChangeNotifier,
        *,
        fleet_ready: anyio.Event,
        startup_wait: float,
        profile: str | None = None,
    ) -> None:
        self.views = views
        self.caller = caller
        self.notifier = notifier
        self.fleet_ready = fleet_ready
        self.startup_deadline = anyio.current_time() + startup_wait
        self.fixed_profile = profile

    def profile_of(self, ctx: RequestContext) -> str:
        """`--profile`, else the HTTP path's profile, else a `match` on the client name, else default."""
        if self.fixed_profile:
            return self.fixed_profile
        if ctx.request is not None:
            chosen = ctx.request.scope.get(PROFILE_SCOPE_KEY)
            if chosen:
                return str(chosen)
        return self.views.profile_for_client(_client_name(ctx))

    def _view(self, ctx: RequestContext) -> SessionView:
        return self.views.for_profile(self.profile_of(ctx))

    async def _await_startup(self) -> None:
        """Within `startup_wait` of the start, wait for every upstream to register or fail once.

        One window for the process, not one per session or request: a `tools/list` early enough
        sees the fast part of the fleet, and after the window nothing ever waits for the fleet.
        """
        if not self.fleet_ready.is_set():
            with anyio.move_on_after(self.startup_deadline - anyio.current_time()):
                await self.fleet_ready.wait()

    async def list_tools(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await self._await_startup()
        view = self._view(ctx)
        key = session_key(ctx)
        if key is not None and ctx.session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            self.notifier.remember(key, view, ctx.session.send_tool_list_changed)
        return types.ListToolsResult(tools=list(view.surface.tools))

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        entry = self.views.registry.get(name)
        return entry.input_schema if entry is not None else None

    async def listen(
        self, ctx: RequestContext, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Serve a 2026-era listen stream: ack, then announce this session's list changes until closed."""
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        wanted = bool(params.notifications.tools_list_changed)
        honored = types.SubscriptionFilter(tools_list_changed=True if wanted else None)
        view = self.views.for_profile(self.profile_of(ctx))  # taken before the ack: no change is missed

        async def notify() -> None:
            changed = types.ToolListChangedNotification(params=types.NotificationParams(_meta=meta))
            await ctx.session.send_notification(changed, related_request_id=ctx.request_id)

        stream = object()
        if wanted:
            self.notifier.remember(stream, view, notify)
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                ),
                related_request_id=ctx.request_id,
            )
            await anyio.sleep_forever()
        finally:
            self.notifier.forget(stream)
        return types.SubscriptionsListenResult(_meta=meta)

    async def call_tool(self, ctx: RequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        view = self._view(ctx)  # a tool of a server still connecting waits for that server alone (the fleet)
        arguments = params.arguments or {}
        try:
            return await self._dispatch(ctx, view, params.name, arguments)
        except InvalidArguments as exc:
            error = {"error": str(exc), "path": exc.path, "constraint": exc.constraint}
            return _text_result({**error, "inputSchema": exc.input_schema}, is_error=True)
        except ToolbridgeError as exc:
            return _text_result(str(exc), is_error=True)
        except Exception as exc:  # session boundary: one bad call never takes the session down
            logger.exception("tool call %s failed", params.name)
            return _text_result(f"toolbridge: internal error: {redact(str(exc))}", is_error=True)

    async def _dispatch(
        self, ctx: RequestContext, view: SessionView, name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        if view.surface.tier == "bridge":
            if name == "tool_search":
                await bridge.prepare_search(self.views, arguments)
                return _text_result(bridge.search(self.views, view, arguments))
            if name == "tool_describe":
                return _text_result(bridge.describe(self.views, view, arguments))
            if name == "tool_call":
                prepared = bridge.prepare_call(self.views, view, arguments)
                return await self._forward(ctx, prepared.entry, prepared.arguments)
        direct = view.core if view.surface.tier == "bridge" else view.scope
        entry = self.views.registry.get(name)
        if entry is None or name not in direct:
            raise UnknownTool(name, bridge.suggest(view, name))
        return await self._forward(ctx, entry, arguments)

    async def _forward(self, ctx: RequestContext, entry: ToolEntry, arguments: dict[str, Any]) -> types.CallToolResult:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(value, total, message)

        return await self.caller.call_tool(entry.server, entry.raw_name, arguments, progress_callback=progress)


class _AnnouncingServer(Server[Any]):
    """Advertise `tools.listChanged` to handshake-era clients on every transport.

    The SDK's HTTP and in-memory paths build initialization options with no notification options,
    which would tell those clients that our list never changes.
    """

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        options = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(options, *args, **kwargs)


def build_server(handlers: Handlers) -> Server[Any]:
    """The SDK server that answers downstream clients with `handlers`."""

    @asynccontextmanager
    async def per_connection(_server: Server[Any]) -> AsyncIterator[_Connection]:
        connection = _Connection()
        try:
            yield connection
        finally:
            handlers.notifier.forget(connection)

    return _AnnouncingServer(
        "toolbridge",
        version=__version__,
        instructions="Tools from many MCP servers. Use tool_search to find deferred tools.",
        lifespan=per_connection,
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_subscriptions_listen=handlers.listen,
        get_tool_input_schema=handlers.input_schema,
    )
