"""Supervision: the life of one member, run in its own task, with the settings shared by the whole fleet.

Each member's task owns its connection (enter and exit in the same task), registers the server's
tools, follows change notifications, keeps the connection alive, reconnects with backoff, and
parks a server that keeps failing. A lazy member is not started until a call wakes it, and a
stdio server unused for its `idle_timeout` is stopped (its tools stay listed). Stdio children
start at most `spawn_concurrency` at a time, so a large fleet does not thrash.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager

import anyio
import httpx2

from proxy.errors import (
    UpstreamError,
    UpstreamNeedsAuth,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamUnavailable,
    describe,
)
from proxy.protocol import BackChannel, NoticeSink
from proxy.upstream.connection import Connection, connect, keep_subscribed
from proxy.upstream.fleet._availability import Availability
from proxy.upstream.fleet._backoff import next_delay
from proxy.upstream.fleet._handshake_connection import HandshakeConnection
from proxy.upstream.fleet._member import STARTABLE, Member, UpstreamState
from proxy.upstream.fleet._publisher import Publisher, ToolSink
from proxy.upstream.fleet._relisting import RelistBudget
from proxy.upstream.fleet._settings import FleetSettings
from proxy.upstream.oauth import Consent

logger = logging.getLogger(__name__)

REFRESH_INTERVAL = 1.0  # beyond the burst, at least this long between two re-listings of one server
REFRESH_BURST = 3  # re-listings in a row after a quiet spell (the listing on connect is one)


class Supervisor:
    """How each member is kept connected and registered; `run(member)` is that member's task.

    `members` is the fleet's table, read to tell a member that was replaced or removed from the
    current one; `on_settled` is called when a member has been tried or has settled for the first time.
    """

    def __init__(
        self,
        members: Mapping[str, Member],
        publisher: Publisher,
        registry: ToolSink,
        availability: Availability,
        on_settled: Callable[[], None],
        settings: FleetSettings,
        notices: NoticeSink | None,
    ) -> None:
        self._members = members
        self._publisher = publisher
        self._registry = registry
        self._availability = availability
        self._on_settled = on_settled
        self._settings = settings
        self._notices = notices
        self._spawn = anyio.CapacityLimiter(settings.spawn_concurrency or 4 * (os.cpu_count() or 1))

    async def run(self, up: Member) -> None:
        """Supervise `up` until its scope is cancelled (removed, restarted, or the fleet stops)."""
        with up.scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._supervise, up)
                tg.start_soon(self._withdraw_after_grace, up)

    def list_cached(self, ups: Iterable[Member]) -> None:
        """Register the servers' cached catalogs: each is listed (and settled) before it connects, and a lazy
        one is not started."""
        for up in self._publisher.list_cached(ups):
            up.settled = True
            if up.lazy:
                up.tried = True
                self._set_state(up, UpstreamState.LAZY, "not started; tools from the cached catalog")

    async def consent_for_call(self, up: Member, channel: BackChannel | None) -> Connection | None:
        """Ask the caller's user to authorize (URL elicitation), then wait for the new connection.

        Raises:
            UpstreamNeedsAuth: no caller to ask, its client cannot open a URL, or the user declined.
        """
        await self._consent_of(up).ask(channel)
        with anyio.move_on_after(up.config.connect_timeout + self._settings.login_poll):
            await up.wait_for(UpstreamState.READY)
        return up.connection

    # --- one member's loop -----------------------------------------------------------------------

    async def _supervise(self, up: Member) -> None:
        try:
            while True:
                if up.state in STARTABLE:
                    await up.wake.wait()
                    up.wake = anyio.Event()
                    self._set_state(up, UpstreamState.STARTING, "starting (a call needs it)")
                try:
                    if await self._connect_and_serve(up):
                        continue  # stopped when idle, or reconnecting in the handshake era
                    error: UpstreamError = UpstreamUnavailable(up.name, "connection closed")
                except UpstreamError as exc:
                    error = exc
                except Exception as exc:  # a bug here must not take the other upstreams down
                    logger.exception("server %s: supervisor failed", up.name)
                    error = UpstreamError(up.name, describe(exc))
                await self._after_failure(up, error)
        finally:
            up.connection = up.handshake = None
            if self._members.get(up.name, up) is up:  # a restarted server's successor keeps its tools
                self._publisher.withdraw(up)

    async def _connect_and_serve(self, up: Member) -> bool:
        """One connection's life: connect, list, serve until it ends; True when it ended on purpose (stopped for
        being idle, or to reconnect in the handshake era).

        A stdio child waits for a spawn slot, held until its tools are listed; `connect_timeout`
        runs from when it has one.

        Raises:
            UpstreamError: the connection failed or ended.
        """
        config = up.config
        auth = await self._consent_of(up).serving_auth() if config.auth is not None else None
        slot = self._spawn if config.is_stdio else None
        if slot is not None:
            await slot.acquire()
        opened = False
        try:
            started = anyio.current_time()
            with anyio.CancelScope(deadline=started + config.connect_timeout) as scope:
                async with (
                    connect(config, config_dir=self._settings.config_dir, log_dir=self._settings.log_dir,
                            transport=up.transport, mode=up.client_mode(self._settings.mode),
                            notices=self._notices, auth=auth) as conn,
                    anyio.create_task_group() as tg,
                ):
                    tg.start_soon(keep_subscribed, conn, up.subscribed)
                    await self._publisher.refresh(up, conn)
                    scope.deadline = math.inf
                    opened = True
                    if slot is not None:
                        slot.release()
                        slot = None
                    up.handshake = self._handshake_twin(up, conn, auth)
                    if up.handshake is not None:
                        tg.start_soon(up.handshake.run)
                    up.connection, up.transport = conn, conn.transport  # pins an SSE fallback
                    up.restarts += up.connected_since is not None
                    up.connected_since = time.time()
                    stopped = await self._run_connected(up, conn)
                    tg.cancel_scope.cancel()
                    return stopped
        finally:
            if slot is not None:
                slot.release()
            if not opened and up.handshake_only:
                logger.warning("server %s: it did not connect in the handshake era; back to 2026-07-28", up.name)
                up.handshake_only = False
        raise UpstreamTimeout(up.name, f"no answer within connect_timeout ({config.connect_timeout:g} s)")

    def _handshake_twin(self, up: Member, conn: Connection, auth: httpx2.Auth | None) -> HandshakeConnection | None:
        """The handshake-era connection a `protocol: auto` HTTP server connected in the 2026 era gets when a
        handshake-era caller first needs it (`fleet/_handshake_connection`). Not for an `auth: oauth` server: a
        token refused on a second session would not reach the consent the first one's refusal asks for."""
        if up.config.protocol != "auto" or not conn.modern or up.config.is_stdio:  # stdio: see `with_back_channel`
            return None
        if up.config.auth is not None:
            return None

        def open_connection() -> AbstractAsyncContextManager[Connection]:
            return connect(up.config, config_dir=self._settings.config_dir, log_dir=self._settings.log_dir,
                           transport=conn.transport, mode="legacy", notices=self._notices, auth=auth)

        return HandshakeConnection(conn, open_connection, keepalive=self._settings.keepalive,
                                   keepalive_timeout=self._settings.keepalive_timeout)

    async def _run_connected(self, up: Member, conn: Connection) -> bool:
        try:
            up.last_used = anyio.current_time()  # idleness counts from the start
            self._set_state(up, UpstreamState.READY, f"connected ({conn.transport})")
            self._settle(up)
            return await self._serve(up, conn)
        except anyio.get_cancelled_exc_class():
            up.connection = up.handshake = None  # the fleet is stopping: nothing to report or retry
            raise
        except Exception:
            self._drop(up)
            raise

    async def _serve(self, up: Member, conn: Connection) -> bool:
        """Re-list on change, ping when quiet, stop when idle or to reconnect in the handshake era (True); raise
        when the connection is gone."""
        signals = conn.signals
        pinged = anyio.current_time()
        relisting = RelistBudget(burst=REFRESH_BURST, interval=REFRESH_INTERVAL, now=pinged)
        relisting.spend(pinged)  # the listing on connect
        while True:
            now = anyio.current_time()
            limit = up.idle_limit
            if limit is not None and up.pending == 0 and now - up.last_used >= limit:
                up.connection, up.handshake, up.used = None, None, False
                self._set_state(up, UpstreamState.STOPPED, "stopped (idle); the next call starts it"
                                if limit else "catalog cached; the first call starts it")
                return True
            due = pinged + self._settings.keepalive
            if limit is not None:  # busy: look again a little later
                due = min(due, up.last_used + limit if up.pending == 0 else now + max(limit, 1.0))
            allowed = relisting.next_at(now)
            held = signals.changed and now < allowed
            if held:  # re-listing re-names the whole fleet: past the burst, a storm is merged into one a second
                due = min(due, allowed)
            await signals.wait(max(0.0, due - now), changes=not held)
            if signals.lost and up.handshake_only and conn.modern:  # `Member.with_back_channel`: no failure
                up.connection, up.handshake, up.connected_since = None, None, None  # not counted as a restart
                self._set_state(up, UpstreamState.STARTING, "reconnecting in the handshake era")
                return True
            if signals.lost:
                raise UpstreamUnavailable(up.name, "connection lost (server exited or went away)")
            now = anyio.current_time()
            if signals.changed and relisting.next_at(now) <= now:
                relisting.spend(now)
                await self._publisher.refresh(up, conn)
            elif now >= pinged + self._settings.keepalive:
                await conn.keepalive(self._settings.keepalive_timeout)
                pinged = anyio.current_time()

    def _drop(self, up: Member) -> None:
        """The connection is ending: stop routing calls to it before it is torn down.

        It was up, so the server can start: its backoff starts over, and a server killed now and
        then is restarted within a call's `restart_wait` instead of drifting towards parking.
        """
        up.connection = up.handshake = None
        up.failures = 0
        if up.state is UpstreamState.READY:
            self._set_state(up, UpstreamState.BACKOFF, "connection closed")

    async def _after_failure(self, up: Member, error: UpstreamError) -> None:
        up.failures += 1
        up.last_error = str(error)
        self._settle(up)
        if isinstance(error, UpstreamNeedsAuth):
            await self._wait_for_consent(up, error)
            return
        if isinstance(error, UpstreamRefused) or up.failures >= self._settings.park_after:
            logger.warning("%s; parked, re-probing every %g s", error, self._settings.reprobe)
            self._set_state(up, UpstreamState.PARKED, error.reason)
            if self._members.get(up.name) is up:
                self._publisher.withdraw(up)
            up.listed = up.stored = False
            await anyio.sleep(self._settings.reprobe)
            return
        delay = next_delay(up.failures - 1)
        logger.warning("%s; reconnecting in %.1f s", error, delay)
        self._set_state(up, UpstreamState.BACKOFF, f"{error.reason}; retrying in {delay:.1f} s")
        await anyio.sleep(delay)

    async def _wait_for_consent(self, up: Member, error: UpstreamNeedsAuth) -> None:
        """No retry loop and no parking: try again once a login stored new tokens (or after `reprobe`)."""
        if up.state is not UpstreamState.NEEDS_AUTH:
            logger.warning("%s", error)
        up.failures = 0
        self._set_state(up, UpstreamState.NEEDS_AUTH, error.reason)
        await self._consent_of(up).wait_for_login(self._settings.reprobe)

    def _consent_of(self, up: Member) -> Consent:
        if up.consent is None or up.consent.config is not up.config:
            up.consent = Consent(up.config, self._settings.config_dir, self._settings.login_poll)
        return up.consent

    # --- state bookkeeping -----------------------------------------------------------------------

    def _set_state(self, up: Member, state: UpstreamState, reason: str) -> None:
        was_offered = up.offered
        up.state, up.reason = state, reason
        logger.info("server %s: %s (%s)", up.name, state.value, reason)
        if was_offered != up.offered:
            self._availability.forget(up.name)
            self._registry.bump()
        up.state_changed.set()
        up.state_changed = anyio.Event()

    async def _withdraw_after_grace(self, up: Member) -> None:
        """A server still down after the flake window: make sessions re-evaluate, so its tools leave."""
        while True:
            await up.wait_offered(True)
            await up.wait_offered(False)
            with anyio.move_on_after(self._settings.grace) as grace:
                await up.wait_offered(True)
            if grace.cancelled_caught:
                self._availability.forget(up.name)
                self._registry.bump()

    def _settle(self, up: Member) -> None:
        if not (up.settled and up.tried):
            up.settled = up.tried = True
            self._on_settled()
