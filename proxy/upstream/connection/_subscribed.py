"""The resource URIs of one server that downstream sessions subscribed to, and keeping a connection
asking for them.

The set belongs to the fleet's member, not to a connection, so each new connection asks for all of
them again: a handshake-era one with `resources/subscribe` and `resources/unsubscribe`, a 2026-era
one in its listen stream's filter (`_listen`). A connection that cannot ask just sends no updates.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import anyio
from mcp import types

from proxy.errors import UpstreamError
from proxy.upstream.connection._client import Connection
from proxy.upstream.connection._listen_stream import follow_changes

logger = logging.getLogger(__name__)


class SubscribedUris:
    """Upstream URIs with at least one downstream subscriber; `generation` counts the changes."""

    def __init__(self) -> None:
        self._uris: set[str] = set()
        self.generation = 0
        self._applied = -1
        self._changed = anyio.Event()

    def add(self, uris: Iterable[str]) -> None:
        new = set(uris) - self._uris
        if new:
            self._uris |= new
            self._bump()

    def remove(self, uri: str) -> None:
        if uri in self._uris:
            self._uris.remove(uri)
            self._bump()

    def sorted(self) -> list[str]:
        return sorted(self._uris)

    def _bump(self) -> None:
        self.generation += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_changed(self, since: int) -> None:
        """Return once the set changed after `generation` was `since`."""
        while self.generation == since:
            await self._changed.wait()

    def mark_applied(self, generation: int) -> None:
        """The live connection asked for the set as it was at `generation`."""
        if generation > self._applied:
            self._applied = generation
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_applied(self, generation: int) -> None:
        """Return once the live connection asked for the set as of `generation` (bound it with a timeout)."""
        while self._applied < generation:
            await self._changed.wait()


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
