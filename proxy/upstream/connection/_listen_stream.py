"""A 2026-era connection's `subscriptions/listen` stream: the list changes it follows, and the URIs
downstream sessions subscribed to on that server (SEP-2575 has no `resources/subscribe`).

The filter of a stream is fixed when it opens, so a change of the URIs re-opens it. Nothing is
replayed between two streams: after each re-open (or a drop) the lists are fetched again.
Resource updates are tee'd to `Signals.on_message`, which routes them to the subscribers.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager

import anyio
from mcp import MCPError, types
from mcp.client.subscriptions import ListenNotSupportedError, ResourceUpdated, Subscription, SubscriptionLost

from proxy.text import escape
from proxy.upstream.connection._client import Connection
from proxy.upstream.connection._subscribed_uris import SubscribedUris

logger = logging.getLogger(__name__)

LISTEN_RETRY_DELAY = 1.0
_SHOWN_URIS = 5


async def follow_changes(conn: Connection, subscribed: SubscribedUris) -> None:
    """Hold a listen stream open until the server closes it or refuses one."""
    reopened = False
    while True:
        generation, uris = subscribed.generation, subscribed.sorted()
        try:
            async with _listen(conn, uris) as subscription:
                if reopened:
                    conn.signals.mark_changed()  # what changed between two streams is not replayed: refetch
                _log_unhonored(conn.server, uris, subscription.honored)
                subscribed.mark_applied(generation)
                if not await _until_uris_change(conn, subscription, subscribed, generation):
                    return
        except SubscriptionLost:
            conn.signals.mark_changed()
            await anyio.sleep(LISTEN_RETRY_DELAY)  # a stream that keeps dropping must not spin
        except (MCPError, ListenNotSupportedError) as exc:
            logger.info("server %s: no change subscription (%s)", conn.server, exc)
            return
        reopened = True


def _listen(conn: Connection, uris: list[str]) -> AbstractAsyncContextManager[Subscription]:
    capabilities = conn.client.server_capabilities
    return conn.client.listen(
        tools_list_changed=True,
        prompts_list_changed=capabilities.prompts is not None,
        resources_list_changed=capabilities.resources is not None,
        resource_subscriptions=uris,
    )


async def _until_uris_change(
    conn: Connection, subscription: Subscription, subscribed: SubscribedUris, generation: int
) -> bool:
    """Mark list changes until the subscribed URIs change (True) or the server closes the stream (False).

    Raises:
        SubscriptionLost: the stream dropped.
    """
    lost: SubscriptionLost | None = None
    async with anyio.create_task_group() as tg:

        async def consume() -> None:
            nonlocal lost
            try:
                async for event in subscription:
                    if not isinstance(event, ResourceUpdated):  # tee'd to on_message, which routes it
                        conn.signals.mark_changed()
            except SubscriptionLost as exc:
                lost = exc
            tg.cancel_scope.cancel()

        tg.start_soon(consume)
        await subscribed.wait_changed(generation)
        tg.cancel_scope.cancel()
        return True
    if lost is not None:
        raise lost
    return False


def _log_unhonored(server: str, asked: list[str], honored: types.SubscriptionFilter) -> None:
    """A server may take fewer URIs than asked for; their subscribers get no updates."""
    taken = set(honored.resource_subscriptions or ())
    missing = [uri for uri in asked if uri not in taken]
    if missing:
        shown = ", ".join(missing[:_SHOWN_URIS]) + (", …" if len(missing) > _SHOWN_URIS else "")
        logger.info("server %s: no updates for %d subscribed resources (%s)", server, len(missing), escape(shown))
