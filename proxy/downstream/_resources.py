"""`resources/*` for one session: the resources and templates of the servers in its scope.

URIs pass unchanged and each read or subscription goes to the server that owns the URI (see
`proxy.catalogs` for ownership and the qualified form that reaches a shadowed copy). A URI outside
the session's scope is unknown to it, exactly like one nobody serves.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable

import anyio
from mcp import MCPError, types

from proxy.downstream._channels import RequestContext
from proxy.downstream._protocol import Upstreams, page, protocol_error
from proxy.errors import ToolbridgeError
from proxy.upstream import BackChannel
from proxy.views import SessionView

logger = logging.getLogger(__name__)

ViewOf = Callable[[RequestContext], Awaitable[SessionView]]
ChannelOf = Callable[[RequestContext], BackChannel | None]
KeyOf = Callable[[RequestContext], Hashable | None]
Notify = Callable[[str], Awaitable[None]]
Target = tuple[str, str]  # (server, upstream URI)
_NOTIFY_TIMEOUT = 5.0


def _route(view: SessionView, uri: str) -> Target:
    """Raises: MCPError when no server in the session's scope serves `uri`."""
    target = view.catalog.route_uri(uri)
    if target is None:
        raise MCPError(types.INVALID_PARAMS, f"toolbridge: no server in this session serves resource {uri!r}")
    return target


class Subscriptions:
    """Who is told `notifications/resources/updated` for which upstream URI, under the URI it used."""

    def __init__(self) -> None:
        self._targets: dict[Target, dict[Hashable, tuple[str, Notify]]] = {}

    def add(self, key: Hashable, target: Target, uri: str, notify: Notify) -> bool:
        """Record it; True when nobody was subscribed to `target` before."""
        sessions = self._targets.setdefault(target, {})
        sessions[key] = (uri, notify)
        return len(sessions) == 1

    def remove(self, key: Hashable, target: Target) -> bool:
        """Drop it; True when nobody is subscribed to `target` any more."""
        sessions = self._targets.get(target, {})
        if sessions.pop(key, None) is None:
            return False
        if not sessions:
            self._targets.pop(target, None)
            return True
        return False

    def forget(self, key: Hashable) -> None:
        for target in list(self._targets):
            self.remove(key, target)

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

    def __init__(self, upstreams: Upstreams, view_of: ViewOf, channel_of: ChannelOf, key_of: KeyOf) -> None:
        self.upstreams = upstreams
        self.view_of = view_of
        self.channel_of = channel_of
        self.key_of = key_of
        self.subscriptions = Subscriptions()

    async def list(self, ctx: RequestContext, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        view = await self.view_of(ctx)
        items, cursor = page(view.catalog.resources, params.cursor if params else None)
        return types.ListResourcesResult(resources=items, next_cursor=cursor)

    async def templates(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        view = await self.view_of(ctx)
        items, cursor = page(view.catalog.templates, params.cursor if params else None)
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=cursor)

    async def read(self, ctx: RequestContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        server, uri = _route(await self.view_of(ctx), params.uri)
        try:
            return await self.upstreams.request(server, f"resource {uri!r}", lambda c: c.read_resource(uri),
                                                self.channel_of(ctx))
        except ToolbridgeError as exc:
            raise protocol_error(exc) from exc

    async def subscribe(self, ctx: RequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
        target = _route(await self.view_of(ctx), params.uri)
        session = ctx.session
        if self.subscriptions.add(self.key_of(ctx), target, params.uri, session.send_resource_updated):
            await self.forward(target, subscribe=True)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: RequestContext, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        target = _route(await self.view_of(ctx), params.uri)
        if self.subscriptions.remove(self.key_of(ctx), target):
            await self.forward(target, subscribe=False)
        return types.EmptyResult()

    async def forward(self, target: Target, *, subscribe: bool) -> None:
        """Tell the owner; one that cannot take subscriptions just sends no updates (logged)."""
        server, uri = target
        what = f"{'subscribe to' if subscribe else 'unsubscribe from'} resource {uri!r}"
        try:
            if subscribe:
                await self.upstreams.request(server, what, lambda c: c.subscribe_resource(uri))
            else:
                await self.upstreams.request(server, what, lambda c: c.unsubscribe_resource(uri))
        except ToolbridgeError as exc:
            logger.info("%s", exc)
