"""2026-era listen streams (`subscriptions/listen`, SEP-2575): a client's one stream for its changes and updates.

The ack names what is honored, then every list change of this session (per principal) and every update of
a URI it named arrives on the stream, tagged with the stream's `subscriptionId`, until the client closes it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from itertools import islice
from typing import Any

import anyio
from mcp import types
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from proxy.downstream.lists._notifier import LIST_CHANGED, ChangeNotifier, Kind
from proxy.downstream.lists._resources import Resources, routable
from proxy.downstream.session import RequestContext, promotion_key
from proxy.views import SessionView


class ListenStreams:
    """Serves each listen stream; `forget` drops what was kept for one once it closes."""

    def __init__(
        self, notifier: ChangeNotifier, resources: Resources, view_of: Callable[[RequestContext], SessionView],
        forget: Callable[[Hashable], None],
    ) -> None:
        self.notifier = notifier
        self.resources = resources
        self.view_of = view_of
        self.forget = forget

    async def listen(
        self, ctx: RequestContext, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Serve a 2026-era listen stream: ack, then announce this session's changes until closed."""
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        wanted = params.notifications
        kinds: list[Kind] = [kind for kind, flag in (("tools", wanted.tools_list_changed),
                                                     ("prompts", wanted.prompts_list_changed),
                                                     ("resources", wanted.resources_list_changed)) if flag]
        view = self.view_of(ctx)  # taken before the ack: no change is missed
        # Of the first MAX_PER_SESSION URIs asked for, those a server serves: the ack names them.
        asked = islice(wanted.resource_subscriptions or (), self.resources.subscriptions.MAX_PER_SESSION)
        routed = [(uri, target) for uri in asked if (target := routable(view, uri)) is not None]
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
