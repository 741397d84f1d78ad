"""`resources/*` for one session: the resources and templates of the servers in its scope.

URIs pass unchanged and each read or subscription goes to the server that owns the URI (see
`proxy.catalogs` for ownership and the qualified form that reaches a shadowed copy). A URI outside
the session's scope is unknown to it, exactly like one nobody serves.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable

import anyio
from mcp import MCPError, types

from proxy.catalogs import AmbiguousUri
from proxy.downstream.lists._advertising import list_hint
from proxy.downstream.rounds import WayBack
from proxy.downstream.session import RequestContext, Upstreams, page, protocol_error, upstream_span
from proxy.errors import ToolbridgeError
from proxy.protocol import BackChannel, caller_meta, rewrite_ui_read
from proxy.views import SessionView

logger = logging.getLogger(__name__)

ViewOf = Callable[[RequestContext], Awaitable[SessionView]]
KeyOf = Callable[[RequestContext], Hashable | None]
Notify = Callable[[str], Awaitable[None]]
Target = tuple[str, str]  # (server, upstream URI)
Release = Callable[[str, str], None]
_NOTIFY_TIMEOUT = 5.0
_NOT_FOUND = (types.INVALID_PARAMS, -32002)  # how a resource is not found: 2026-07-28, and before it


def route(view: SessionView, uri: str, *, template: bool = False) -> Target:
    """The server and upstream URI (or template, for a completion) that `uri` names in this session.

    Raises:
        MCPError: no server in the session's scope serves `uri`, or more than one claims it (the error's
            data names the qualified forms to ask for instead).
    """
    try:
        target = view.catalog.route_template(uri) if template else view.catalog.route_uri(uri)
    except AmbiguousUri as exc:
        raise MCPError(types.INVALID_PARAMS, f"toolbridge: {exc}", {"uri": uri, "alternatives": exc.alternatives}
                       ) from exc
    if target is None:
        raise MCPError(types.INVALID_PARAMS, f"toolbridge: no server in this session serves resource {uri[:300]!r}",
                       {"uri": uri})
    return target


def routable(view: SessionView, uri: str) -> Target | None:
    """`route`, or None where it would refuse."""
    try:
        return route(view, uri)
    except MCPError:
        return None


class Subscriptions:
    """Who is told `notifications/resources/updated` for which upstream URI, under the URI it used.

    Over HTTP a session's key is its `Mcp-Session-Id`, and nothing tells us when such a session
    ends: a client may subscribe `MAX_PER_SESSION` URIs at most, and past `MAX_SESSIONS` sessions
    or `MAX_TOTAL` subscriptions the least recently subscribing session is dropped. Each session's
    own targets are indexed, so forgetting it costs its own subscriptions only.
    """

    MAX_PER_SESSION = 1024
    MAX_SESSIONS = 4096
    MAX_TOTAL = 65_536  # about 30 MiB; 4,096 full sessions would hold 2 GiB

    def __init__(self, release: Release) -> None:
        self._release = release  # told (server, upstream URI) when its last subscriber goes, however it goes
        self._targets: dict[Target, dict[Hashable, tuple[str, Notify]]] = {}
        self._sessions: OrderedDict[Hashable, set[Target]] = OrderedDict()
        self._total = 0
        self._evicted = False

    def add(self, key: Hashable, target: Target, uri: str, notify: Notify) -> None:
        """Record it.

        Raises:
            MCPError: the session already holds `MAX_PER_SESSION` other subscriptions.
        """
        own = self._sessions.setdefault(key, set())
        if target not in own:
            if len(own) >= self.MAX_PER_SESSION:
                raise MCPError(types.INVALID_PARAMS, f"toolbridge: a session holds at most {self.MAX_PER_SESSION} "
                                                     "resource subscriptions; unsubscribe from one first")
            own.add(target)
            self._total += 1
        self._sessions.move_to_end(key)
        sessions = self._targets.setdefault(target, {})
        sessions[key] = (uri, notify)
        self._evict()

    def remove(self, key: Hashable, target: Target) -> None:
        """Drop it; `target` is released when nobody is subscribed to it any more."""
        own = self._sessions.get(key)
        if own is None or target not in own:
            return
        own.remove(target)
        self._total -= 1
        if not own:
            del self._sessions[key]
        sessions = self._targets[target]
        del sessions[key]
        if not sessions:
            del self._targets[target]
            self._release(*target)

    def forget(self, key: Hashable) -> None:
        for target in list(self._sessions.get(key, ())):
            self.remove(key, target)

    def _evict(self) -> None:
        while len(self._sessions) > self.MAX_SESSIONS or self._total > self.MAX_TOTAL:
            if not self._evicted:
                self._evicted = True
                logger.warning("more than %d sessions or %d resource subscriptions: dropping the least recently "
                               "subscribing sessions' subscriptions", self.MAX_SESSIONS, self.MAX_TOTAL)
            self.forget(next(iter(self._sessions)))

    async def deliver(self, server: str, uri: str) -> None:
        for key, (as_uri, notify) in list(self._targets.get((server, uri), {}).items()):
            with anyio.move_on_after(_NOTIFY_TIMEOUT):
                try:
                    await notify(as_uri)
                    continue
                except Exception as exc:  # a dead session must not stop the others' updates
                    logger.debug("dropping a resource subscriber whose connection failed: %s", exc)
            self.remove(key, (server, uri))


class Resources:
    """The `resources/*` handlers."""

    def __init__(self, upstreams: Upstreams, view_of: ViewOf, way_back: WayBack, key_of: KeyOf) -> None:
        self.upstreams = upstreams
        self.view_of = view_of
        self.way_back = way_back
        self.key_of = key_of
        self.subscriptions = Subscriptions(upstreams.unsubscribe)

    async def list(self, ctx: RequestContext, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        view = await self.view_of(ctx)
        items, cursor = page(view.catalog.resources, params.cursor if params else None)
        return types.ListResourcesResult(resources=items, next_cursor=cursor, **list_hint(ctx, view, "resources"))

    async def templates(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        view = await self.view_of(ctx)
        items, cursor = page(view.catalog.templates, params.cursor if params else None)
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=cursor,
                                                 **list_hint(ctx, view, "templates"))

    async def read(self, ctx: RequestContext, params: types.ReadResourceRequestParams
                   ) -> types.ReadResourceResult | types.InputRequiredResult:
        """The upstream's contents, each under a URI that reads it back: the one asked for, or `address`'s; a
        2026-era caller may be asked for input first (`WayBack`).

        Raises:
            MCPError: the session has no such resource, or the upstream failed (a refusal of the URI then names
                it in its data, SEP-2164).
        """
        view = await self.view_of(ctx)
        server, uri = route(view, params.uri)

        async def read(channel: BackChannel) -> types.ReadResourceResult:
            try:
                with upstream_span(server, "resources/read", attributes={"mcp.resource.uri": uri}):
                    return await self.upstreams.request(
                        server, f"resource {uri!r}",
                        lambda c: c.read_resource(uri, meta=caller_meta(channel.capabilities)), channel)
            except ToolbridgeError as exc:
                error = protocol_error(exc)
                if error.code in _NOT_FOUND:
                    raise MCPError(error.code, error.message, {"uri": params.uri}) from exc
                raise error from exc

        result = await self.way_back.run(ctx, view.profile, params, read)
        if isinstance(result, types.InputRequiredResult):
            return result
        result = rewrite_ui_read(result, server)
        result.contents = [content.model_copy(update={
            "uri": params.uri if content.uri == uri else view.catalog.address(server, content.uri)})
            for content in result.contents]
        return result

    async def subscribe(self, ctx: RequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """Raises: MCPError for a request without a session (2026 era: `subscriptions/listen` subscribes)."""
        key = self.key_of(ctx)
        if key is None:
            raise MCPError(types.INVALID_REQUEST, "toolbridge: resources/subscribe needs a session; "
                                                  "a 2026-era client subscribes with subscriptions/listen")
        target = route(await self.view_of(ctx), params.uri)
        await self.watch(key, [(params.uri, target)], ctx.session.send_resource_updated)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: RequestContext, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.subscriptions.remove(self.key_of(ctx), route(await self.view_of(ctx), params.uri))
        return types.EmptyResult()

    async def watch(self, key: Hashable | None, routed: Iterable[tuple[str, Target]], notify: Notify) -> None:
        """Subscribe `key` to each target under its URI, and return once each owner is asking for their updates.

        Each owner is asked in one go (a 2026-era one re-opens its listen stream once, not once a URI).

        Raises:
            MCPError: the session holds as many subscriptions as it may.
        """
        targets: dict[str, list[str]] = {}
        for uri, target in routed:
            self.subscriptions.add(key, target, uri, notify)
            targets.setdefault(target[0], []).append(target[1])
        for server, uris in targets.items():
            await self.upstreams.subscribe(server, uris)
