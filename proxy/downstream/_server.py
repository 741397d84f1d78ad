"""The downstream handlers: what one lowlevel SDK `Server` (built in `_lowlevel`) answers for the whole fleet.

`tools/list` is computed per session from its profile and its promotions (`lists/_promotion`); resources,
prompts, completion and logging come from the servers in its scope (`lists/_resources`, `lists/_prompts`,
`rounds/_session_logs`); tool calls are answered by `calls/_calls`, and 2026-era listen streams by `_listen`. List
changes are announced by `_notifier.ChangeNotifier`. Each request's view waits for the fleet only
within the startup window.
"""

from __future__ import annotations

import os
from collections.abc import Hashable

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import MCPError, types

from proxy.downstream.calls import LargeResults, Tasks, ToolCalls, result_owner
from proxy.downstream.http import PROFILE_SCOPE_KEY
from proxy.downstream.lists import (
    LIST_CHANGED,
    ChangeNotifier,
    Kind,
    ListenStreams,
    Prompts,
    Resources,
    list_hint,
)
from proxy.downstream.rounds import RequestStates, RoundTrips, SessionLogs, WayBack
from proxy.downstream.session import (
    CallObserver,
    RequestContext,
    Upstreams,
    caller,
    client_name,
    handshake_era,
    promotion_key,
)
from proxy.protocol import Notice
from proxy.replicated import Limits
from proxy.views import SessionView, Views


class Handlers:
    """How each downstream request is answered, from the session's view of the catalog."""

    def __init__(
        self,
        views: Views,
        upstreams: Upstreams,
        notifier: ChangeNotifier,
        *,
        fleet_ready: anyio.Event,
        startup_wait: float,
        fleet_started: anyio.Event | None = None,
        profile: str | None = None,
        on_call: CallObserver | None = None,
        large_results: LargeResults | None = None,
        tasks: Tasks | None = None,
        request_states: RequestStates | None = None,
        notices: MemoryObjectReceiveStream[Notice] | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.notices = notices
        self.large_results = large_results
        self.views = views
        self.upstreams = upstreams
        self.notifier = notifier
        self.fleet_ready = fleet_ready  # every upstream registered (from a connection or its cached catalog) or failed
        self.fleet_started = fleet_started or fleet_ready  # every upstream connected or failed once
        self.startup_wait = startup_wait
        self.startup_deadline: float | None = None  # set by the first request that waits
        self.fixed_profile = profile
        self.round_trips = RoundTrips(request_states or RequestStates(os.urandom(32)))
        self.logs = SessionLogs(views, upstreams)
        way_back = WayBack(self.round_trips, self.logs)
        self.resources = Resources(upstreams, self._view, way_back, lambda ctx: caller(ctx).session)
        self.prompts = Prompts(upstreams, self._view, way_back)
        self.promoter = notifier.promoter
        self.tasks = tasks or Tasks.alone(upstreams)
        self.calls = ToolCalls(views, upstreams, self._view, self._await_startup, self.promoter, self.logs,
                               self.round_trips, self.tasks, large_results=large_results, on_call=on_call,
                               limits=limits)
        self.streams = ListenStreams(notifier, self.resources, self.view_of, self.forget)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host what outlives one request (2026-era calls awaiting the client's input) and deliver what the
        upstreams said that no call claimed, until cancelled."""
        async with anyio.create_task_group() as tg:
            if self.notices is not None:  # a clone of its own: only its owner closes what a receive waits on
                tg.start_soon(self._deliver, self.notices.clone())
            await tg.start(self.round_trips.run)
            task_status.started()

    async def _deliver(self, notices: MemoryObjectReceiveStream[Notice]) -> None:
        """Resource updates to their subscribers, logs to the sessions that asked for that level."""
        async with notices:
            async for server, notification in notices:
                if isinstance(notification, types.ResourceUpdatedNotification):
                    await self.resources.subscriptions.deliver(server, notification.params.uri)
                elif isinstance(notification, types.LoggingMessageNotification):
                    await self.logs.deliver(server, notification.params)

    def forget(self, key: Hashable) -> None:
        """A connection ended: drop what was kept for it."""
        self.notifier.forget(key)
        self.resources.subscriptions.forget(key)
        self.logs.forget(key)
        self.promoter.forget(key)

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

    async def _await_startup(self, *, catalogs: bool = False) -> None:
        """Wait for every upstream to register (or every one to connect: `catalogs`) or fail once, within
        `startup_wait` of the process's first request.

        One window for the process, not one per session or request, and never longer than `startup_wait`
        (SPEC §6.7): a client that gives up on a slow answer (Claude Code's health check, after 5–8 s) loses
        every upstream, so one slow server must not hold the others back. Resources and prompts are known
        only from a connection (the cached catalog holds tools), hence the wait for connections there.
        """
        settled = self.fleet_started if catalogs else self.fleet_ready
        if settled.is_set():
            return
        if self.startup_deadline is None:
            self.startup_deadline = anyio.current_time() + self.startup_wait
        with anyio.move_on_after(self.startup_deadline - anyio.current_time()):
            await settled.wait()

    def _remember(self, ctx: RequestContext, view: SessionView, kind: Kind) -> None:
        key = caller(ctx).session
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
        tools = list(surface.handshake_era_tools if handshake_era(ctx) else surface.tools)
        return types.ListToolsResult(tools=tools, **list_hint(ctx, view, "tools"))

    async def read_resource(
        self, ctx: RequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """An upstream's resource, or a page of a large result toolbridge kept (`toolbridge://results/…`)."""
        if self.large_results is not None and self.large_results.owns(params.uri):
            try:
                owner = result_owner(caller(ctx).principal, (await self._view(ctx)).profile)
                return await self.large_results.read(params.uri, owner)
            except ValueError as exc:
                raise MCPError(types.INVALID_PARAMS, str(exc)) from exc
        await self._await_startup(catalogs=True)  # the resource's server may still be starting
        return await self.resources.read(ctx, params)

    async def list_prompts(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        await self._await_startup(catalogs=True)
        self._remember(ctx, await self._view(ctx), "prompts")
        return await self.prompts.list(ctx, params)

    async def list_resources(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await self._await_startup(catalogs=True)
        self._remember(ctx, await self._view(ctx), "resources")
        return await self.resources.list(ctx, params)

    async def set_logging_level(self, ctx: RequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
        return await self.logs.set_level(ctx, caller(ctx), self.profile_of(ctx), params.level)
