"""The upstream fleet: one supervisor task per upstream, all in one task group.

Each supervisor owns its connection (enter and exit in the same task), registers the server's
tools, follows change notifications, keeps the connection alive, reconnects with backoff, and
parks a server that keeps failing. Tool calls run in the caller's task on the live connection.

A server with a cached catalog is listed from it at once; a lazy one is not started until a call
needs it, and a stdio server unused for its `idle_timeout` is stopped (its tools stay listed).
Stdio children start at most `spawn_concurrency` at a time, so a large fleet does not thrash.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import Client, types

from proxy.config import UpstreamConfig
from proxy.errors import (
    NeedsBackChannel,
    SessionLost,
    UpstreamError,
    UpstreamNeedsAuth,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamUnavailable,
    describe,
)
from proxy.shared import CatalogCache  # on disk (upstream/_cache.py) or in Redis
from proxy.upstream._availability import Availability
from proxy.upstream._backchannel import BackChannel, NoticeSink
from proxy.upstream._backoff import next_delay
from proxy.upstream._client import KEEPALIVE_TIMEOUT, Connection, ProgressCallback
from proxy.upstream._connect import connect
from proxy.upstream._consent import LOGIN_POLL, Consent
from proxy.upstream._gate import ToolGate
from proxy.upstream._member import STARTABLE, Member, ServerStatus, UpstreamState
from proxy.upstream._publisher import CatalogSink, Publisher, ToolSink
from proxy.upstream._subscribed import keep_subscribed

logger = logging.getLogger(__name__)

KEEPALIVE_INTERVAL = 30.0
PARK_AFTER_FAILURES = 5
REPROBE_INTERVAL = 300.0
REFRESH_INTERVAL = 1.0  # at least this long between two re-listings of one server
T = TypeVar("T")


class Fleet:
    """Every configured upstream, connected concurrently and kept registered in `registry`."""

    def __init__(
        self,
        upstreams: Mapping[str, UpstreamConfig],
        registry: ToolSink,
        *,
        config_dir: Path,
        log_dir: Path,
        mode: str = "auto",
        keepalive: float = KEEPALIVE_INTERVAL,
        keepalive_timeout: float = KEEPALIVE_TIMEOUT,
        park_after: int = PARK_AFTER_FAILURES,
        reprobe: float = REPROBE_INTERVAL,
        grace: float = 60.0,
        catalogs: CatalogSink | None = None,
        notices: NoticeSink | None = None,
        cache: CatalogCache | None = None,
        lazy: bool = False,
        idle_timeout: float | None = None,
        spawn_concurrency: int | None = None,
        login_poll: float = LOGIN_POLL,
        gate: ToolGate | None = None,
    ) -> None:
        self.registry = registry
        self._publisher = Publisher(registry, catalogs, cache, gate)
        self._notices = notices
        self.availability = Availability(check=self.is_offered, grace=grace)
        self.ready = anyio.Event()  # every server settled: what the first tools/list waits for
        self.started = anyio.Event()  # every server tried: what a one-shot command waits for
        self._config_dir = config_dir
        self._log_dir = log_dir
        self._mode = mode
        self._keepalive = keepalive
        self._keepalive_timeout = keepalive_timeout
        self._park_after = park_after
        self._reprobe = reprobe
        self._grace = grace
        self._spawn = anyio.CapacityLimiter(spawn_concurrency or 4 * (os.cpu_count() or 1))
        self._login_poll = login_poll
        self._lazy = lazy
        self._idle_timeout = idle_timeout
        self._servers = {name: self._new_upstream(config) for name, config in upstreams.items()}
        self._desired: dict[str, UpstreamConfig] = dict(upstreams)
        self._desired_changed = anyio.Event()

    def _new_upstream(self, config: UpstreamConfig) -> Member:
        up = Member(config, transport="stdio" if config.is_stdio else (config.transport or "auto"),
                       lazy=self._lazy if config.lazy is None else config.lazy,
                       idle_timeout=(config.idle_timeout or self._idle_timeout) if config.is_stdio else None)
        if not config.enabled:
            up.state, up.reason, up.settled, up.tried = UpstreamState.DISABLED, "disabled in config", True, True
        return up

    # --- public API ------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Supervise every enabled upstream until cancelled; reports started at once.

        Applies `update()`s as they come: only added, removed and changed servers are touched.
        """
        try:
            async with anyio.create_task_group() as tg:
                self._list_cached(self._servers.values())
                for up in self._servers.values():
                    self._start(tg, up)
                self._check_ready()
                task_status.started()
                while True:
                    await self._desired_changed.wait()
                    self._desired_changed = anyio.Event()
                    self._reconcile(tg)
        finally:
            for up in self._servers.values():
                self._publisher.withdraw(up)

    def update(self, upstreams: Mapping[str, UpstreamConfig]) -> None:
        """Adopt a new set of upstream configs (hot reload); `run()` applies it at once."""
        self._desired = dict(upstreams)
        self._desired_changed.set()

    def _reconcile(self, tg: anyio.abc.TaskGroup) -> None:
        """Stop removed and changed servers, start added and changed ones; leave the rest alone."""
        for name in sorted(set(self._servers) - set(self._desired)):
            logger.info("server %s: removed from the config; stopping it", name)
            self._servers.pop(name).scope.cancel()
        new: list[Member] = []
        for name, config in sorted(self._desired.items()):
            old = self._servers.get(name)
            if old is not None and old.config == config:
                continue
            if old is not None:
                logger.info("server %s: its config changed; restarting it", name)
                old.scope.cancel()
            up = self._servers[name] = self._new_upstream(config)
            if old is not None:
                up.subscribed = old.subscribed  # the sessions' subscriptions outlive the restart
            new.append(up)
        self._list_cached(new)  # one registration for all of them
        for up in new:
            self._start(tg, up)
        self._check_ready()

    def _start(self, tg: anyio.abc.TaskGroup, up: Member) -> None:
        if up.state is UpstreamState.DISABLED:
            self._publisher.withdraw(up)
            return
        tg.start_soon(self._run_upstream, up, name=f"upstream {up.name}")

    async def _run_upstream(self, up: Member) -> None:
        with up.scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._supervise, up)
                tg.start_soon(self._withdraw_after_grace, up)

    def is_ready(self, server: str) -> bool:
        up = self._servers.get(server)
        return up is not None and up.state is UpstreamState.READY

    def is_offered(self, server: str) -> bool:
        """Running, or listed and startable on demand (lazy, stopped, or starting with a known catalog)."""
        up = self._servers.get(server)
        return up is not None and up.offered

    def status(self) -> list[ServerStatus]:
        return [up.status() for up in sorted(self._servers.values(), key=lambda u: u.name)]

    async def wait_state(self, server: str, *states: UpstreamState) -> None:
        """Wait until `server` is in one of `states` (bound it with `fail_after`)."""
        await self._servers[server].wait_for(*states)

    async def call_tool(
        self,
        server: str,
        raw_name: str,
        arguments: dict[str, Any] | None,
        progress_callback: ProgressCallback | None = None,
        channel: BackChannel | None = None,
    ) -> types.CallToolResult:
        """Call a tool on `server`'s live connection, from the caller's task.

        Cancelling the caller cancels the upstream request; progress is passed through, and the
        upstream's sampling, elicitation, roots requests and logs go to `channel`. A lazy or
        stopped server is started (within its `connect_timeout`); a call to a server that is
        restarting waits for it (`restart_wait`). A call that finds the upstream's session gone
        (it restarted) is retried once after reconnecting, and so is one that failed because a
        `protocol: auto` server asked its client over a back channel the 2026-07-28 era lacks (the
        server is reconnected in the handshake era first). A call to a server that needs the
        user's consent asks for it through `channel` (a URL elicitation) and goes ahead once the
        server is connected.

        Raises:
            UpstreamNeedsAuth: the server needs consent and the caller cannot give it.
            UpstreamUnavailable: the server is not connected, or died during the call.
            UpstreamTimeout: no answer within the server's `timeout`.
            NeedsBackChannel: a server pinned to `protocol: 2026` asked its client over a back channel.
            UpstreamError: the upstream answered with a protocol error.
        """
        up = self._servers.get(server)
        if up is None:
            raise UpstreamUnavailable(server, "no such upstream")
        up.pending += 1
        up.used = True
        try:
            await up.until_started()
            if up.state is UpstreamState.NEEDS_AUTH:
                await self._consent_for_call(up, channel)
            conn = await up.live_connection()
            try:
                return await conn.call_tool(raw_name, arguments, timeout=up.config.timeout,
                                            progress_callback=progress_callback, channel=channel)
            except SessionLost:
                await up.wait_replaced(conn)
            except NeedsBackChannel:
                if up.config.protocol != "auto":
                    raise
                await up.reconnect_in_handshake_era(conn)
            except UpstreamUnavailable:
                if up.consent is None or not up.consent.needed:
                    raise
                await self._consent_for_call(up, channel)  # the token went mid-call: refused with a 401, never ran
            conn = await up.live_connection()
            return await conn.call_tool(raw_name, arguments, timeout=up.config.timeout,
                                        progress_callback=progress_callback, channel=channel)
        finally:
            up.pending -= 1
            up.last_used = anyio.current_time()

    async def request(
        self, server: str, what: str, operation: Callable[[Client], Awaitable[T]], channel: BackChannel | None = None
    ) -> T:
        """Run a request other than a tool call (read, get, complete, subscribe, set level) on `server`.

        Raises:
            UpstreamUnavailable: the server is not connected, or died meanwhile.
            UpstreamTimeout: no answer within the server's `timeout`.
            UpstreamError: the upstream answered with an error.
        """
        up = self._servers.get(server)
        conn = up.connection if up is not None else None
        if up is None or up.state is not UpstreamState.READY or conn is None:
            raise UpstreamUnavailable(server, "temporarily unavailable")
        with anyio.move_on_after(up.config.timeout):
            return await conn.request(what, operation, channel)
        raise UpstreamTimeout(server, f"{what} gave no answer within {up.config.timeout:g} s; cancelled")

    async def subscribe(self, server: str, uris: Sequence[str]) -> None:
        """Ask `server` for updates of `uris` from now on, through every reconnect (see `_subscribed`).

        Returns once the live connection asked for them (within the server's `timeout`), so an update right after
        the caller's acknowledgment reaches it; a server that is down is asked when it is back.
        """
        up = self._servers.get(server)
        if up is None:
            return
        up.subscribed.add(uris)
        if up.state is not UpstreamState.READY:
            return
        with anyio.move_on_after(up.config.timeout):
            await up.subscribed.wait_applied(up.subscribed.generation)

    def unsubscribe(self, server: str, uri: str) -> None:
        """No session wants updates of `uri` any more; the live connection stops asking soon after."""
        up = self._servers.get(server)
        if up is not None:
            up.subscribed.remove(uri)

    def logs(self, server: str) -> bool:
        """Whether `server` is connected and takes `logging/setLevel`."""
        up = self._servers.get(server)
        return up is not None and up.connection is not None and up.connection.logs

    # --- supervision -----------------------------------------------------------------------------

    async def _supervise(self, up: Member) -> None:
        try:
            while True:
                if up.state in STARTABLE:
                    await up.wake.wait()
                    up.wake = anyio.Event()
                    self._set_state(up, UpstreamState.STARTING, "starting (a call needs it)")
                try:
                    if await self._connect_and_serve(up):
                        continue  # stopped when idle
                    error: UpstreamError = UpstreamUnavailable(up.name, "connection closed")
                except UpstreamError as exc:
                    error = exc
                except Exception as exc:  # a bug here must not take the other upstreams down
                    logger.exception("server %s: supervisor failed", up.name)
                    error = UpstreamError(up.name, describe(exc))
                await self._after_failure(up, error)
        finally:
            up.connection = None
            if self._servers.get(up.name, up) is up:  # a restarted server's successor keeps its tools
                self._publisher.withdraw(up)

    async def _connect_and_serve(self, up: Member) -> bool:
        """One connection's life: connect, list, serve until it ends; True when stopped for being idle.

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
        try:
            started = anyio.current_time()
            with anyio.CancelScope(deadline=started + config.connect_timeout) as scope:
                async with (
                    connect(config, config_dir=self._config_dir, log_dir=self._log_dir, transport=up.transport,
                            mode=up.client_mode(self._mode),
                            notices=self._notices, auth=auth) as conn,
                    anyio.create_task_group() as tg,
                ):
                    tg.start_soon(keep_subscribed, conn, up.subscribed)
                    await self._publisher.refresh(up, conn)
                    scope.deadline = math.inf
                    if slot is not None:
                        slot.release()
                        slot = None
                    up.connection, up.transport = conn, conn.transport  # pins an SSE fallback
                    up.restarts += up.connected_since is not None
                    up.connected_since = time.time()
                    stopped = await self._run_connected(up, conn)
                    tg.cancel_scope.cancel()
                    return stopped
        finally:
            if slot is not None:
                slot.release()
        raise UpstreamTimeout(up.name, f"no answer within connect_timeout ({config.connect_timeout:g} s)")

    async def _run_connected(self, up: Member, conn: Connection) -> bool:
        try:
            up.last_used = anyio.current_time()  # idleness counts from the start
            self._set_state(up, UpstreamState.READY, f"connected ({conn.transport})")
            self._settle(up)
            return await self._serve(up, conn)
        except anyio.get_cancelled_exc_class():
            up.connection = None  # the fleet is stopping: nothing to report or retry
            raise
        except Exception:
            self._drop(up)
            raise

    async def _serve(self, up: Member, conn: Connection) -> bool:
        """Re-list on change, ping when quiet, stop when idle (True); raise when the connection is gone."""
        signals = conn.signals
        pinged = refreshed = anyio.current_time()  # the listing on connect counts as a refresh
        while True:
            now = anyio.current_time()
            limit = up.idle_limit
            if limit is not None and up.pending == 0 and now - up.last_used >= limit:
                up.connection, up.used = None, False
                self._set_state(up, UpstreamState.STOPPED, "stopped (idle); the next call starts it"
                                if limit else "catalog cached; the first call starts it")
                return True
            due = pinged + self._keepalive
            if limit is not None:  # busy: look again a little later
                due = min(due, up.last_used + limit if up.pending == 0 else now + max(limit, 1.0))
            held = signals.changed and now < refreshed + REFRESH_INTERVAL
            if held:  # re-listing re-names the whole fleet: a storm of list_changed is merged into one a second
                due = min(due, refreshed + REFRESH_INTERVAL)
            await signals.wait(max(0.0, due - now), changes=not held)
            if signals.lost:
                raise UpstreamUnavailable(up.name, "connection lost (server exited or went away)")
            if signals.changed and anyio.current_time() >= refreshed + REFRESH_INTERVAL:
                await self._publisher.refresh(up, conn)
                refreshed = anyio.current_time()
            elif anyio.current_time() >= pinged + self._keepalive:
                await conn.keepalive(self._keepalive_timeout)
                pinged = anyio.current_time()

    def _list_cached(self, ups: Iterable[Member]) -> None:
        """Register the servers' cached catalogs: each is listed (and settled) before it connects, and a lazy
        one is not started."""
        for up in self._publisher.list_cached(ups):
            if up.lazy:
                up.tried = True
                self._set_state(up, UpstreamState.LAZY, "not started; tools from the cached catalog")

    def _drop(self, up: Member) -> None:
        """The connection is ending: stop routing calls to it before it is torn down.

        It was up, so the server can start: its backoff starts over, and a server killed now and
        then is restarted within a call's `restart_wait` instead of drifting towards parking.
        """
        up.connection = None
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
        if isinstance(error, UpstreamRefused) or up.failures >= self._park_after:
            logger.warning("%s; parked, re-probing every %g s", error, self._reprobe)
            self._set_state(up, UpstreamState.PARKED, error.reason)
            if self._servers.get(up.name) is up:
                self._publisher.withdraw(up)
            up.listed = up.stored = False
            await anyio.sleep(self._reprobe)
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
        await self._consent_of(up).wait_for_login(self._reprobe)

    def _consent_of(self, up: Member) -> Consent:
        if up.consent is None or up.consent.config is not up.config:
            up.consent = Consent(up.config, self._config_dir, self._login_poll)
        return up.consent

    async def _consent_for_call(self, up: Member, channel: BackChannel | None) -> Connection | None:
        """Ask the caller's user to authorize (URL elicitation), then wait for the new connection.

        Raises:
            UpstreamNeedsAuth: no caller to ask, its client cannot open a URL, or the user declined.
        """
        await self._consent_of(up).ask(channel)
        with anyio.move_on_after(up.config.connect_timeout + self._login_poll):
            await up.wait_for(UpstreamState.READY)
        return up.connection

    # --- state bookkeeping -----------------------------------------------------------------------

    def _set_state(self, up: Member, state: UpstreamState, reason: str) -> None:
        was_offered = up.offered
        up.state, up.reason = state, reason
        logger.info("server %s: %s (%s)", up.name, state.value, reason)
        if was_offered != up.offered:
            self.availability.forget(up.name)
            self.registry.bump()
        up.state_changed.set()
        up.state_changed = anyio.Event()

    async def _withdraw_after_grace(self, up: Member) -> None:
        """A server still down after the flake window: make sessions re-evaluate, so its tools leave."""
        while True:
            await up.wait_offered(True)
            await up.wait_offered(False)
            with anyio.move_on_after(self._grace) as grace:
                await up.wait_offered(True)
            if grace.cancelled_caught:
                self.availability.forget(up.name)
                self.registry.bump()

    def _settle(self, up: Member) -> None:
        if not (up.settled and up.tried):
            up.settled = up.tried = True
            self._check_ready()

    def _check_ready(self) -> None:
        if all(up.settled for up in self._servers.values()):
            self.ready.set()
        if all(up.tried for up in self._servers.values()):
            self.started.set()
