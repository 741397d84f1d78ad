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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS

from proxy import __version__, bridge
from proxy.catalog import Catalog, SessionView
from proxy.errors import InvalidArguments, ToolbridgeError, UnknownTool, redact
from proxy.registry import ToolEntry
from proxy.upstream import ProgressCallback

logger = logging.getLogger(__name__)

PROFILE_SCOPE_KEY = "toolbridge.profile"
_COALESCE_SECONDS = 0.05
_MAX_TRACKED_CONNECTIONS = 4096
_NOTIFY_TIMEOUT = 5.0

Context = ServerRequestContext[Any, Any]


class ToolCaller(Protocol):
    """What the server needs from the fleet to call an upstream tool."""

    async def call_tool(
        self,
        server: str,
        raw_name: str,
        arguments: dict[str, Any],
        progress_callback: ProgressCallback | None = None,
    ) -> types.CallToolResult: ...


class _ListChangedServer(Server[Any]):
    """Advertise `tools.listChanged` to handshake-era clients on every transport.

    The SDK's HTTP and in-memory paths build initialization options with no notification options,
    which would tell those clients that our list never changes.
    """

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        options = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(options, *args, **kwargs)


@dataclass
class _Subscriber:
    """A handshake-era connection and the fingerprint of the last list it was given or told of."""

    profile: str
    fingerprint: str
    notify: Callable[[], Awaitable[None]]


def _text_result(payload: Any, *, is_error: bool = False) -> types.CallToolResult:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _client_name(ctx: Context) -> str | None:
    params = ctx.session.client_params
    return params.client_info.name if params is not None and params.client_info is not None else None


class ToolbridgeServer:
    """Builds the SDK server and keeps each session's view of the catalog current."""

    def __init__(
        self,
        catalog: Catalog,
        caller: ToolCaller,
        *,
        fleet_ready: anyio.Event,
        startup_wait: float,
        profile: str | None = None,
    ) -> None:
        self.catalog = catalog
        self.caller = caller
        self.fleet_ready = fleet_ready
        self.startup_wait = startup_wait
        self.fixed_profile = profile
        self._subscribers: OrderedDict[int, _Subscriber] = OrderedDict()
        self.server = _ListChangedServer(
            "toolbridge",
            version=__version__,
            instructions="Tools from many MCP servers. Use tool_search to find deferred tools.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
            get_tool_input_schema=self._input_schema,
        )

    # --- sessions ----------------------------------------------------------------------------

    def profile_of(self, ctx: Context) -> str:
        """`--profile`, else the HTTP path's profile, else a `match` on the client name, else default."""
        if self.fixed_profile:
            return self.fixed_profile
        if ctx.request is not None:
            chosen = ctx.request.scope.get(PROFILE_SCOPE_KEY)
            if chosen:
                return str(chosen)
        return self.catalog.profile_for_client(_client_name(ctx))

    async def _view(self, ctx: Context) -> SessionView:
        """The session's view, after waiting (bounded) for the fleet's first registrations."""
        if not self.fleet_ready.is_set():
            with anyio.move_on_after(self.startup_wait):
                await self.fleet_ready.wait()
        return self.catalog.view(self.profile_of(ctx))

    def _remember(self, ctx: Context, view: SessionView) -> None:
        if ctx.session.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return
        key = id(ctx.session._connection)
        self._subscribers[key] = _Subscriber(view.profile, view.fingerprint, ctx.session.send_tool_list_changed)
        self._subscribers.move_to_end(key)
        while len(self._subscribers) > _MAX_TRACKED_CONNECTIONS:
            self._subscribers.popitem(last=False)

    async def _changes(self, generation: int) -> AsyncIterator[None]:
        """Yield after each registry change since `generation`, a burst coalesced into one."""
        while True:
            await self.catalog.registry.wait_for_change(generation)
            await anyio.sleep(_COALESCE_SECONDS)
            generation = self.catalog.registry.generation
            yield

    async def watch_changes(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Tell each handshake-era session when its `tools/list` has changed. Runs until cancelled."""
        changes = self._changes(self.catalog.registry.generation)
        task_status.started()
        async for _ in changes:
            for key, subscriber in list(self._subscribers.items()):
                fingerprint = self.catalog.view(subscriber.profile).fingerprint
                if fingerprint != subscriber.fingerprint:
                    subscriber.fingerprint = fingerprint
                    if not await self._notify(subscriber):
                        self._subscribers.pop(key, None)

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

    # --- handlers ----------------------------------------------------------------------------

    async def _list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        view = await self._view(ctx)
        self._remember(ctx, view)
        return types.ListToolsResult(tools=list(view.surface.tools))

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        entry = self.catalog.registry.get(name)
        return entry.input_schema if entry is not None else None

    async def _listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Serve a 2026-era listen stream: ack, then announce this session's list changes."""
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        wanted = bool(params.notifications.tools_list_changed)
        honored = types.SubscriptionFilter(tools_list_changed=True if wanted else None)
        profile, generation = self.profile_of(ctx), self.catalog.registry.generation
        fingerprint = self.catalog.view(profile).fingerprint  # taken before the ack: no change is missed
        await ctx.session.send_notification(
            types.SubscriptionsAcknowledgedNotification(
                params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
            ),
            related_request_id=ctx.request_id,
        )
        if not wanted:
            await anyio.sleep_forever()
        async for _ in self._changes(generation):
            current = self.catalog.view(profile).fingerprint
            if current != fingerprint:
                fingerprint = current
                await ctx.session.send_notification(
                    types.ToolListChangedNotification(params=types.NotificationParams(_meta=meta)),
                    related_request_id=ctx.request_id,
                )
        return types.SubscriptionsListenResult(_meta=meta)

    async def _call_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        view = await self._view(ctx)
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
        self, ctx: Context, view: SessionView, name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        if view.surface.tier == "bridge":
            if name == "tool_search":
                await bridge.prepare_search(self.catalog, arguments)
                return _text_result(bridge.search(self.catalog, view, arguments))
            if name == "tool_describe":
                return _text_result(bridge.describe(self.catalog, view, arguments))
            if name == "tool_call":
                prepared = bridge.prepare_call(self.catalog, view, arguments)
                return await self._forward(ctx, prepared.entry, prepared.arguments)
        direct = view.core if view.surface.tier == "bridge" else view.scope
        entry = self.catalog.registry.get(name)
        if entry is None or name not in direct:
            raise UnknownTool(name, bridge.suggest(view, name))
        return await self._forward(ctx, entry, arguments)

    async def _forward(self, ctx: Context, entry: ToolEntry, arguments: dict[str, Any]) -> types.CallToolResult:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(value, total, message)

        return await self.caller.call_tool(entry.server, entry.raw_name, arguments, progress_callback=progress)

