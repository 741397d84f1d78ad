"""Keeping a connection asking for the resource URIs downstream sessions subscribed to (`SubscribedUris`).

The set belongs to the fleet's member, not to a connection, so each new connection asks for all of
them again: a handshake-era one with `resources/subscribe` and `resources/unsubscribe`, a 2026-era
one in its listen stream's filter (`_listen_stream`). A connection that cannot ask just sends no updates.
"""

from __future__ import annotations

import logging

import anyio
from mcp import types

from proxy.errors import UpstreamError
from proxy.upstream.connection._client import Connection
from proxy.upstream.connection._listen_stream import follow_changes
from proxy.upstream.connection._subscribed_uris import SubscribedUris

logger = logging.getLogger(__name__)


async def keep_subscribed(conn: Connection, subscribed: SubscribedUris) -> None:
    """Keep `conn` asking for `subscribed` until it ends; a 2026-era connection's listen stream also
    follows list changes."""
    if not conn.modern:
        await _by_requests(conn, subscribed)
    elif conn.announces_changes:
        await follow_changes(conn, subscribed)
    while True:  # nothing (more) to ask: callers waiting for their URI must not wait in vain
        generation = subscribed.generation
        subscribed.mark_applied(generation)
        await subscribed.wait_changed(generation)


async def _by_requests(conn: Connection, subscribed: SubscribedUris) -> None:
    """The handshake era: one `resources/subscribe` per new URI, one `resources/unsubscribe` per dropped one."""
    held: set[str] = set()
    while True:
        generation, wanted = subscribed.generation, set(subscribed.sorted())
        for uri in sorted(wanted - held):
            await _ask(conn, uri, subscribe=True)
        for uri in sorted(held - wanted):
            await _ask(conn, uri, subscribe=False)
        held = wanted
        subscribed.mark_applied(generation)
        await subscribed.wait_changed(generation)


async def _ask(conn: Connection, uri: str, *, subscribe: bool) -> None:
    """One request; a server that cannot take it just sends no updates (logged).

    Sent as is: the SDK's helpers for it warn that the 2026 era removed it, which is why it is sent only here.
    """
    what = f"{'subscribe to' if subscribe else 'unsubscribe from'} resource {uri!r}"
    request: types.SubscribeRequest | types.UnsubscribeRequest = (
        types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)) if subscribe
        else types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)))
    with anyio.move_on_after(conn.config.timeout):
        try:
            await conn.request(what, lambda c: c.session.send_request(request, types.EmptyResult))
        except UpstreamError as exc:
            logger.info("%s", exc)
