"""The downstream handlers: what one lowlevel SDK `Server` (built in `_lowlevel`) answers for the whole fleet.

`tools/list` is computed per session from its profile; resources, prompts, completion and logging
come from the servers in its scope (`_resources`, `_prompts`, `_logging`). A tool call carries a
back channel to its caller: requests on its own stream for a handshake-era session, input-required
rounds for a 2026-era one (`_channels`, `_roundtrips`). List changes are announced by
`_notifier.ChangeNotifier`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Hashable, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from mcp import MCPError, types
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from proxy.downstream import _bridge as bridge
from proxy.downstream._arguments import check_call, entry_schema
from proxy.downstream._carried import list_hint
from proxy.downstream._channels import RequestContext, SessionChannel
from proxy.downstream._identity import client_name, principal, promotion_key, session_key
from proxy.downstream._large import LargeResults, result_owner
from proxy.downstream._logging import SessionLogs
from proxy.downstream._notifier import LIST_CHANGED, ChangeNotifier, Kind
from proxy.downstream._observe import BRIDGE_SERVER, CallObserver, CallRecord, session_label
from proxy.downstream._promotion import Promoter
from proxy.downstream._prompts import Prompts
from proxy.downstream._protocol import Upstreams, handshake_era
from proxy.downstream._request_state import RequestStates
from proxy.downstream._resources import Resources
from proxy.downstream._roundtrips import RoundTripChannel, RoundTrips
from proxy.downstream._scrub import scrub_error_result
from proxy.downstream._tasks import Tasks, declared
from proxy.downstream._trace import record_tool_result, tool_attributes, upstream_span
from proxy.errors import DeferredTool, InvalidArguments, ToolbridgeError, UnknownTool, UpstreamError, redact
from proxy.registry import ToolEntry
from proxy.upstream import BackChannel, HandedOver, accepting_tasks, rewrite_ui_result
from proxy.views import SessionView, Views

if TYPE_CHECKING:
    from proxy.shared import SharedPromotions  # Redis is imported only when a URL is given

logger = logging.getLogger(__name__)

PROFILE_SCOPE_KEY = "toolbridge.profile"


def _handshake_shaped(result: types.CallToolResult) -> types.CallToolResult:
    """A 2026-era upstream may send any JSON value as `structuredContent`; the handshake-era schema takes only an
    object, so there the value travels as the text the spec asks for beside it (added when it is missing)."""
    value = result.structured_content
    if value is None or isinstance(value, dict):
        return result
    content = result.content or [types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False))]
    return result.model_copy(update={"structured_content": None, "content": content})


def _text_result(payload: Any, *, is_error: bool = False) -> types.CallToolResult:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _offers(view: SessionView, name: str, arguments: dict[str, Any]) -> bool:
    """Whether the call can be answered from what is registered now (else the startup window may wait).

    A search or describe is about the whole catalog, and a `tool_call` about its target.
    """
    if name in ("tool_search", "tool_describe"):
        return False
    if name == "tool_call":
        target = arguments.get("name")  # anything a client sent: a list or a dict is not hashable
        return isinstance(target, str) and target in view.scope
    return name in view.scope or any(tool.name == name for tool in view.surface.tools)


class Handlers:
    """How each downstream request is answered, from the session's view of the catalog."""

    def __init__(
        self,
        views: Views,
        upstreams: Upstreams,
        notifier: ChangeNotifier,
        *,
        fleet_ready: anyio.Event,
        startup_wait: float | None,
        profile: str | None = None,
        on_call: CallObserver | None = None,
        large_results: LargeResults | None = None,
        shared_promotions: SharedPromotions | None = None,
        tasks: Tasks | None = None,
        request_states: RequestStates | None = None,
    ) -> None:
        self.on_call = on_call
        self.large_results = large_results
        self.views = views
        self.upstreams = upstreams
        self.notifier = notifier
        self.fleet_ready = fleet_ready
        self.startup_wait = startup_wait
        self.startup_deadline: float | None = None  # set by the first request that waits
        self.fixed_profile = profile
        self.round_trips = RoundTrips(request_states or RequestStates(os.urandom(32)))
        self.logs = SessionLogs(views, upstreams)
        self.resources = Resources(upstreams, self._view, self._request_channel, session_key)
        self.prompts = Prompts(upstreams, self._view, self._request_channel)
        self.promoter = Promoter(views, notifier, shared_promotions)
        self.tasks = tasks or Tasks.alone(upstreams)
        notifier.session_tools = self.promoter.tools_fingerprint

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host what outlives one request (2026-era calls awaiting the client's input) until cancelled."""
        await self.round_trips.run(task_status=task_status)

    def forget(self, key: Hashable) -> None:
        """A connection ended: drop what was kept for it."""
        self.notifier.forget(key)
        self.resources.subscriptions.forget(key)
        self.logs.forget(key)
        self.promoter.forget(key)

    async def on_notice(self, server: str, notification: types.ServerNotification) -> None:
        """An upstream notification that no call claimed: resource updates and unrelated logs."""
        if isinstance(notification, types.ResourceUpdatedNotification):
            await self.resources.subscriptions.deliver(server, notification.params.uri)
        elif isinstance(notification, types.LoggingMessageNotification):
            await self.logs.deliver(server, notification.params)

    def profile_of(self, ctx: RequestContext, client: str | None = None) -> str:
        """`--profile`, else the HTTP path's profile, else a `match` on the client name (`client` while the
        session does not know it yet), else default."""
        if self.fixed_profile:
            return self.fixed_profile
        if ctx.request is not None:
            chosen = ctx.request.scope.get(PROFILE_SCOPE_KEY)
            if chosen:
                return str(chosen)
        return self.views.profile_for_client(client or client_name(ctx))

    def view_of(self, ctx: RequestContext, client: str | None = None) -> SessionView:
        return self.views.for_profile(self.profile_of(ctx, client))

    async def _view(self, ctx: RequestContext) -> SessionView:
        """The session's view; no request waits for the fleet here (see `_await_startup`)."""
        return self.views.for_profile(self.profile_of(ctx))

    async def _await_startup(self) -> None:
        """Wait for every upstream to register or fail once, within `startup_wait` of the first list.

        One window for the process, opened by its first request, not one per session or request:
        after the window nothing ever waits for the fleet. With no `startup_wait` the window lasts
        until the fleet has settled, which each upstream's `connect_timeout` bounds.
        """
        if self.startup_wait is None:
            await self.fleet_ready.wait()
        elif not self.fleet_ready.is_set():
            if self.startup_deadline is None:
                self.startup_deadline = anyio.current_time() + self.startup_wait
            with anyio.move_on_after(self.startup_deadline - anyio.current_time()):
                await self.fleet_ready.wait()

    def _request_channel(self, ctx: RequestContext) -> BackChannel | None:
        """A back channel for a request that is not a tool call: handshake-era sessions only."""
        if not handshake_era(ctx):
            return None
        key = session_key(ctx)
        return SessionChannel(ctx, lambda: self.logs.level(key))

    def _remember(self, ctx: RequestContext, view: SessionView, kind: Kind) -> None:
        key = session_key(ctx)
        if key is None or not handshake_era(ctx):
            return
        session = ctx.session

        async def notify(changed: Kind) -> None:
            await session.send_notification(LIST_CHANGED[changed]())

        self.notifier.remember(key, view, notify, (kind,))

    async def list_tools(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await self._await_startup()
        view = await self._view(ctx)
        self._remember(ctx, view, "tools")
        key = promotion_key(ctx)
        await self.promoter.load(key, view)
        surface, _ = self.views.session_surface(view, self.promoter.promoted(key, view))
        return types.ListToolsResult(tools=list(surface.tools), **list_hint(ctx, view, "tools"))

    async def read_resource(
        self, ctx: RequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """An upstream's resource, or a page of a large result toolbridge kept (`toolbridge://results/…`)."""
        if self.large_results is not None and self.large_results.owns(params.uri):
            try:
                owner = result_owner(principal(ctx), (await self._view(ctx)).profile)
                return await self.large_results.read(params.uri, owner)
            except ValueError as exc:
                raise MCPError(types.INVALID_PARAMS, str(exc)) from exc
        await self._await_startup()  # the resource's server may still be starting
        return await self.resources.read(ctx, params)

    async def list_prompts(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        await self._await_startup()
        self._remember(ctx, await self._view(ctx), "prompts")
        return await self.prompts.list(ctx, params)

    async def list_resources(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await self._await_startup()
        self._remember(ctx, await self._view(ctx), "resources")
        return await self.resources.list(ctx, params)

    async def set_logging_level(self, ctx: RequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
        return await self.logs.set_level(ctx, session_key(ctx), self.profile_of(ctx), params.level)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        entry = self.views.registry.get(name)
        return entry_schema(entry) if entry is not None else None

    async def listen(
        self, ctx: RequestContext, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Serve a 2026-era listen stream: ack, then announce this session's changes until closed."""
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        wanted = params.notifications
        kinds: list[Kind] = [kind for kind, flag in (("tools", wanted.tools_list_changed),
                                                     ("prompts", wanted.prompts_list_changed),
                                                     ("resources", wanted.resources_list_changed)) if flag]
        view = self.views.for_profile(self.profile_of(ctx))  # taken before the ack: no change is missed
        # Of the first MAX_PER_SESSION URIs asked for, those a server serves: the ack names them.
        asked = islice(wanted.resource_subscriptions or (), self.resources.subscriptions.MAX_PER_SESSION)
        routed = [(uri, target) for uri in asked if (target := view.catalog.route_uri(uri)) is not None]
        uris = [uri for uri, _ in routed]
        honored = types.SubscriptionFilter(
            tools_list_changed=True if "tools" in kinds else None,
            prompts_list_changed=True if "prompts" in kinds else None,
            resources_list_changed=True if "resources" in kinds else None,
            resource_subscriptions=uris or None,
        )

        async def notify(kind: Kind) -> None:
            changed = LIST_CHANGED[kind](params=types.NotificationParams(_meta=meta))
            await ctx.session.send_notification(changed, related_request_id=ctx.request_id)

        async def updated(uri: str) -> None:
            notification = types.ResourceUpdatedNotification(
                params=types.ResourceUpdatedNotificationParams(uri=uri, _meta=meta))
            await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

        stream = object()
        if kinds:
            self.notifier.remember(stream, view, notify, kinds, session=promotion_key(ctx))
        await self.resources.watch(stream, routed, updated)
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                ),
                related_request_id=ctx.request_id,
            )
            await anyio.sleep_forever()
        finally:
            self.forget(stream)
        return types.SubscriptionsListenResult(_meta=meta)

    async def call_tool(
        self, ctx: RequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """Answer a call; a 2026-era session's call runs across input-required rounds when it must, and
        one that declared the tasks extension gets the task an upstream made of it (`_tasks`)."""
        if handshake_era(ctx):
            key = session_key(ctx)
            return _handshake_shaped(await self._answer(ctx, params, SessionChannel(ctx, lambda: self.logs.level(key))))

        async def run(channel: RoundTripChannel) -> types.CallToolResult:
            return await self._answer(ctx, params, channel)

        accepting = accepting_tasks.set(declared(ctx))  # the background call started here inherits it
        try:
            result = await self.round_trips.call(ctx, principal(ctx), params, run)
        finally:
            accepting_tasks.reset(accepting)
        return self.tasks.handle(ctx, result) if isinstance(result, HandedOver) else result

    async def _answer(
        self, ctx: RequestContext, params: types.CallToolRequestParams, channel: SessionChannel | RoundTripChannel
    ) -> types.CallToolResult:
        view = await self._view(ctx)
        arguments = params.arguments or {}
        if not _offers(view, params.name, arguments):  # only the startup window waits
            await self._await_startup()
            view = await self._view(ctx)
        started, clock = time.time(), time.perf_counter()
        target: list[ToolEntry] = []  # the upstream tool this call reached, once known
        error: Exception | None = None
        session = promotion_key(ctx)
        try:
            result = await self._dispatch(session, view, params.name, arguments, channel, target, handshake_era(ctx))
        except InvalidArguments as exc:
            error = exc
            payload = {"error": str(exc), "path": exc.path, "constraint": exc.constraint}
            result = _text_result({**payload, "inputSchema": exc.input_schema}, is_error=True)
        except ToolbridgeError as exc:
            error = exc
            result = _text_result(str(exc), is_error=True)
        except Exception as exc:  # session boundary: one bad call never takes the session down
            error = exc
            logger.exception("tool call %s failed", params.name)
            result = _text_result(f"toolbridge: internal error: {redact(str(exc))}", is_error=True)
        if error is None and target and self.large_results is not None:
            result = await self.large_results.cut(result, result_owner(principal(ctx), view.profile))
        if error is None and not result.is_error and handshake_era(ctx):  # 2026 era: only pins promote (SEP-2567)
            await self.promoter.use(session, view, [entry.name for entry in target])
        if self.on_call is not None:
            self.on_call(_record(ctx, view, params.name, arguments, target, result, error,
                                 started, time.perf_counter() - clock))
        return result

    async def _dispatch(
        self, session: Hashable | None, view: SessionView, name: str, arguments: dict[str, Any],
        channel: SessionChannel | RoundTripChannel, target: list[ToolEntry], legacy: bool,
    ) -> types.CallToolResult:
        """Bridge tools answer in every tier: a client may hold a list from before a change."""
        if name == "tool_search":
            await bridge.prepare_search(self.views, view, arguments)
            return _text_result(bridge.search(self.views, view, arguments))
        if name == "tool_describe":
            described, pin = bridge.describe(self.views, view, arguments), bridge.pin_request(arguments)
            if pin is not None or legacy:
                await self.promoter.use(session, view, described["tools"], keep=pin is not False)
            if pin is not None:
                described["pinned"] = list(self.promoter.promoted(session, view)) if view.promote else []
            return _text_result(described)
        if name == "tool_call":
            prepared = await bridge.prepare_call(self.views, view, arguments)
            target.append(prepared.entry)
            return await self._forward(prepared.entry, prepared.arguments, channel)
        if view.surface.tier != "bridge":
            direct = name in view.scope
        elif not (direct := name in view.core or name in self.promoter.promoted(session, view)):
            await self.promoter.load(session, view)  # another replica may have promoted it
            direct = name in self.promoter.promoted(session, view)
        if not direct and len(callees := view.app_calls.get(name, ())) == 1:  # an MCP App calling its server back
            name, direct = callees[0], True
        entry = self.views.registry.get(name)
        if entry is not None and not direct and view.surface.tier == "bridge" and name in view.allowed:
            raise DeferredTool(name)
        if entry is None or not direct:
            raise UnknownTool(name, list(view.app_calls.get(name, ())) or bridge.suggest(view, name),
                              searchable=view.surface.tier == "bridge")
        target.append(entry)
        return await self._forward(entry, await check_call(arguments, entry), channel)

    async def _forward(
        self, entry: ToolEntry, arguments: dict[str, Any], channel: SessionChannel | RoundTripChannel
    ) -> types.CallToolResult:
        with upstream_span(entry.server, "tools/call", entry.raw_name, tool_attributes(entry.raw_name)) as span:
            result = record_tool_result(span, await self.upstreams.call_tool(
                entry.server, entry.raw_name, arguments, progress_callback=channel.progress, channel=channel))
        return rewrite_ui_result(scrub_error_result(result), entry.server)
SHOWN_NAME = 256  # characters of a requested name that reached no tool kept in the record (the audit log's line)


def _record(
    ctx: RequestContext, view: SessionView, name: str, arguments: dict[str, Any], target: list[ToolEntry],
    result: types.CallToolResult, error: Exception | None, started: float, duration: float,
) -> CallRecord:
    """The operator's record of one answered call (metrics, the audit log)."""
    entry = target[0] if target else None
    bridged = name == "tool_call"
    requested = arguments.get("name") if bridged else name
    client = ctx.session.client_params.client_info if ctx.session.client_params is not None else None
    if error is None:
        outcome = "tool_error" if result.is_error else "ok"
    else:
        refused = isinstance(error, ToolbridgeError) and not isinstance(error, UpstreamError)
        outcome = "refused" if refused else "failed"
    return CallRecord(
        started=started, duration=duration, session=session_label(session_key(ctx)), profile=view.profile,
        client=client.name if client else None, client_version=client.version if client else None,
        tool=entry.name if entry else str(requested)[:SHOWN_NAME], server=entry.server if entry else BRIDGE_SERVER,
        via=name if bridged else None, outcome=outcome, error=type(error).__name__ if error else None,
        arguments=arguments.get("arguments") or {} if bridged else arguments,
    )
