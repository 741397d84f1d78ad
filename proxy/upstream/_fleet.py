"""The upstream fleet: one supervisor task per upstream, all in one task group.

Each supervisor owns its connection (enter and exit in the same task), registers the server's
tools, follows change notifications, keeps the connection alive, reconnects with backoff, and
parks a server that keeps failing. Tool calls run in the caller's task on the live connection.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
from mcp import Client, types

from proxy.config import UpstreamConfig
from proxy.errors import (
    SessionLost,
    UpstreamError,
    UpstreamNeedsAuth,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from proxy.upstream._availability import Availability
from proxy.upstream._backchannel import BackChannel, NoticeSink
from proxy.upstream._backoff import next_delay
from proxy.upstream._connection import Connection, ProgressCallback, TransportChoice, connect
from proxy.upstream._consent import LOGIN_POLL, Consent

logger = logging.getLogger(__name__)

KEEPALIVE_INTERVAL = 30.0
PARK_AFTER_FAILURES = 5
REPROBE_INTERVAL = 300.0
STABLE_AFTER = 60.0  # a connection that lived this long wipes the failure count
T = TypeVar("T")


class ToolSink(Protocol):
    """Where the fleet puts each server's tools (the registry); it bumps on availability changes."""

    def set_server_tools(self, server: str, tools: Iterable[types.Tool], *, prefix: bool = True) -> Any: ...

    def remove_server(self, server: str) -> Any: ...

    def bump(self) -> None: ...


class CatalogSink(Protocol):
    """Where the fleet puts each server's resources, resource templates and prompts."""

    def set_server_catalog(
        self, server: str, resources: Iterable[types.Resource], templates: Iterable[types.ResourceTemplate],
        prompts: Iterable[types.Prompt], *, prefix: bool = True,
    ) -> None: ...

    def remove_server(self, server: str) -> None: ...


class UpstreamState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    BACKOFF = "backoff"
    NEEDS_AUTH = "needs-auth"  # an OAuth upstream waiting for `toolbridge login`; its known tools stay offered
    PARKED = "parked"
    DISABLED = "disabled"


@dataclass(frozen=True)
class ServerStatus:
    """One row of `Fleet.status()`; every text in it is already redacted."""

    name: str
    state: UpstreamState
    reason: str
    tools: int
    transport: str
    protocol_version: str | None
    last_error: str | None
    restarts: int = 0
    connected_since: float | None = None  # wall-clock seconds since the epoch


@dataclass
class _Upstream:
    config: UpstreamConfig
    state: UpstreamState = UpstreamState.STARTING
    reason: str = "starting"
    last_error: str | None = None
    transport: TransportChoice = "auto"
    connection: Connection | None = None
    tool_count: int = 0
    failures: int = 0
    settled: bool = False
    restarts: int = 0
    connected_since: float | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    state_changed: anyio.Event = field(default_factory=anyio.Event)
    consent: Consent | None = None  # an `auth: oauth` upstream's, once it first connects

    @property
    def name(self) -> str:
        return self.config.name


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
        park_after: int = PARK_AFTER_FAILURES,
        reprobe: float = REPROBE_INTERVAL,
        grace: float = 60.0,
        login_poll: float = LOGIN_POLL,
        catalogs: CatalogSink | None = None,
        notices: NoticeSink | None = None,
    ) -> None:
        self.registry = registry
        self.catalogs = catalogs
        self._notices = notices
        self.availability = Availability(check=self._offers_tools, grace=grace)
        self.ready = anyio.Event()
        self._config_dir = config_dir
        self._log_dir = log_dir
        self._mode = mode
        self._keepalive = keepalive
        self._park_after = park_after
        self._reprobe = reprobe
        self._login_poll = login_poll
        self._grace = grace
        self._servers: dict[str, _Upstream] = {}
        self._desired: dict[str, UpstreamConfig] = dict(upstreams)
        self._desired_changed = anyio.Event()

    # --- public API ------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Supervise every enabled upstream until cancelled; reports started at once.

        Applies `update()`s as they come: only added, removed and changed servers are touched.
        """
        try:
            async with anyio.create_task_group() as tg:
                self._reconcile(tg)
                self._check_ready()
                task_status.started()
                while True:
                    await self._desired_changed.wait()
                    self._desired_changed = anyio.Event()
                    self._reconcile(tg)
        finally:
            for up in self._servers.values():
                self._withdraw(up)

    def update(self, upstreams: Mapping[str, UpstreamConfig]) -> None:
        """Adopt a new set of upstream configs (hot reload); `run()` applies it at once."""
        self._desired = dict(upstreams)
        self._desired_changed.set()

    def _reconcile(self, tg: anyio.abc.TaskGroup) -> None:
        """Stop removed and changed servers, start added and changed ones; leave the rest alone."""
        for name in sorted(set(self._servers) - set(self._desired)):
            logger.info("server %s: removed from the config; stopping it", name)
            self._servers.pop(name).scope.cancel()
        for name, config in sorted(self._desired.items()):
            old = self._servers.get(name)
            if old is not None and old.config == config:
                continue
            if old is not None:
                logger.info("server %s: its config changed; restarting it", name)
                old.scope.cancel()
            up = self._servers[name] = _Upstream(
                config, transport="stdio" if config.is_stdio else (config.transport or "auto"))
            if not config.enabled:
                up.state, up.reason, up.settled = UpstreamState.DISABLED, "disabled in config", True
                self._withdraw(up)
                continue
            tg.start_soon(self._run_upstream, up, name=f"upstream {name}")
        self._check_ready()

    async def _run_upstream(self, up: _Upstream) -> None:
        with up.scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._supervise, up)
                tg.start_soon(self._withdraw_after_grace, up)

    def is_ready(self, server: str) -> bool:
        up = self._servers.get(server)
        return up is not None and up.state is UpstreamState.READY

    def _offers_tools(self, server: str) -> bool:
        """Ready, or waiting for consent: a call then tells the user how to give it."""
        up = self._servers.get(server)
        return up is not None and up.state in (UpstreamState.READY, UpstreamState.NEEDS_AUTH)

    def status(self) -> list[ServerStatus]:
        return [
            ServerStatus(up.name, up.state, up.reason, up.tool_count if up.state is UpstreamState.READY else 0,
                         up.connection.transport if up.connection else up.transport,
                         up.connection.protocol_version if up.connection else None, up.last_error,
                         up.restarts, up.connected_since)
            for up in sorted(self._servers.values(), key=lambda u: u.name)
        ]

    async def wait_state(self, server: str, *states: UpstreamState) -> None:
        """Wait until `server` is in one of `states` (bound it with `fail_after`)."""
        up = self._servers[server]
        while up.state not in states:
            await up.state_changed.wait()

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
        upstream's sampling, elicitation, roots requests and logs go to `channel`. A call
        that finds the upstream's session gone (it restarted) is retried once after reconnecting.
        A call to a server that needs the user's consent asks for it through `channel` (a URL
        elicitation) and goes ahead once the server is connected.

        Raises:
            UpstreamNeedsAuth: the server needs consent and the caller cannot give it.
            UpstreamUnavailable: the server is not connected, or died during the call.
            UpstreamTimeout: no answer within the server's `timeout`.
            UpstreamError: the upstream answered with a protocol error.
        """
        up = self._servers.get(server)
        if up is None:
            raise UpstreamUnavailable(server, "no such upstream")
        conn = up.connection
        if up.state is UpstreamState.NEEDS_AUTH:
            conn = await self._consent_for_call(up, channel)
        if up.state is not UpstreamState.READY or conn is None:
            raise UpstreamUnavailable(server, f"temporarily unavailable ({up.reason})")
        try:
            return await conn.call_tool(raw_name, arguments, timeout=up.config.timeout,
                                        progress_callback=progress_callback, channel=channel)
        except SessionLost:
            await self._wait_replaced(up, conn)
        except UpstreamUnavailable:
            if up.consent is None or not up.consent.needed:
                raise
            await self._consent_for_call(up, channel)  # the token went mid-call: refused with a 401, never ran
        conn = up.connection
        if up.state is not UpstreamState.READY or conn is None:
            raise UpstreamUnavailable(server, f"temporarily unavailable ({up.reason})")
        return await conn.call_tool(raw_name, arguments, timeout=up.config.timeout,
                                    progress_callback=progress_callback, channel=channel)

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

    def logs(self, server: str) -> bool:
        """Whether `server` is connected and takes `logging/setLevel`."""
        up = self._servers.get(server)
        return up is not None and up.connection is not None and up.connection.logs

    # --- supervision -----------------------------------------------------------------------------

    async def _supervise(self, up: _Upstream) -> None:
        try:
            while True:
                try:
                    await self._connect_and_serve(up)
                    error: UpstreamError = UpstreamUnavailable(up.name, "connection closed")
                except UpstreamError as exc:
                    error = exc
                except Exception as exc:  # a bug here must not take the other upstreams down
                    logger.exception("server %s: supervisor failed", up.name)
                    error = UpstreamError(up.name, f"{type(exc).__name__}: {exc}")
                await self._after_failure(up, error)
        finally:
            up.connection = None
            if self._servers.get(up.name, up) is up:  # a restarted server's successor keeps its tools
                self._withdraw(up)

    async def _connect_and_serve(self, up: _Upstream) -> None:
        """One connection's life: connect, list, serve until it ends.

        Raises:
            UpstreamError: the connection failed or ended.
        """
        config = up.config
        auth = await self._consent_of(up).serving_auth() if config.auth is not None else None
        started = anyio.current_time()
        with anyio.CancelScope(deadline=started + config.connect_timeout) as scope:
            async with (
                connect(config, config_dir=self._config_dir, log_dir=self._log_dir, transport=up.transport,
                        mode=self._mode if config.protocol == "auto" else config.client_mode,
                        notices=self._notices, auth=auth) as conn,
                anyio.create_task_group() as tg,
            ):
                if conn.modern and conn.announces_changes:
                    tg.start_soon(conn.follow_changes)
                await self._refresh(up, conn)
                scope.deadline = math.inf
                up.connection, up.transport = conn, conn.transport  # pins an SSE fallback
                up.restarts += up.connected_since is not None
                up.connected_since = time.time()
                try:
                    self._set_state(up, UpstreamState.READY, f"connected ({conn.transport})")
                    self._settle(up)
                    await self._serve(up, conn)
                except anyio.get_cancelled_exc_class():
                    up.connection = None  # the fleet is stopping: nothing to report or retry
                    raise
                except Exception:
                    self._drop(up, anyio.current_time() - started)
                    raise
                tg.cancel_scope.cancel()
        if scope.cancelled_caught:
            raise UpstreamTimeout(up.name, f"no answer within connect_timeout ({config.connect_timeout:g} s)")

    async def _serve(self, up: _Upstream, conn: Connection) -> None:
        """Re-list on change, ping when idle; return or raise when the connection is gone."""
        signals = conn.signals
        while True:
            await signals.wait(self._keepalive)
            if signals.lost:
                raise UpstreamUnavailable(up.name, "connection lost (server exited or went away)")
            if signals.changed:
                await self._refresh(up, conn)
            else:
                await conn.keepalive()

    async def _refresh(self, up: _Upstream, conn: Connection) -> None:
        """List every page and register the result: one `set_server_tools`, one generation bump."""
        conn.signals.changed = False  # a notification during the listing triggers one more refresh
        tools = await conn.list_tools()
        if self.catalogs is not None:
            resources, templates, prompts = await conn.list_catalog()
            self.catalogs.set_server_catalog(up.name, resources, templates, prompts, prefix=up.config.prefix)
        up.tool_count = len(tools)
        change = self.registry.set_server_tools(up.name, tools, prefix=up.config.prefix)
        if change.changed:
            logger.info("server %s: %d tools (+%d ~%d -%d)", up.name, len(tools),
                        len(change.added), len(change.replaced), len(change.removed))

    def _drop(self, up: _Upstream, uptime: float) -> None:
        """The connection is ending: stop routing calls to it before it is torn down."""
        up.connection = None
        if uptime >= STABLE_AFTER:
            up.failures = 0
        if up.state is UpstreamState.READY:
            self._set_state(up, UpstreamState.BACKOFF, "connection closed")

    async def _after_failure(self, up: _Upstream, error: UpstreamError) -> None:
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
                self._withdraw(up)
            await anyio.sleep(self._reprobe)
            return
        delay = next_delay(up.failures - 1)
        logger.warning("%s; reconnecting in %.1f s", error, delay)
        self._set_state(up, UpstreamState.BACKOFF, f"{error.reason}; retrying in {delay:.1f} s")
        await anyio.sleep(delay)

    async def _wait_for_consent(self, up: _Upstream, error: UpstreamNeedsAuth) -> None:
        """No retry loop and no parking: try again once a login stored new tokens (or after `reprobe`)."""
        if up.state is not UpstreamState.NEEDS_AUTH:
            logger.warning("%s", error)
        up.failures = 0
        self._set_state(up, UpstreamState.NEEDS_AUTH, error.reason)
        await self._consent_of(up).wait_for_login(self._reprobe)

    def _consent_of(self, up: _Upstream) -> Consent:
        if up.consent is None or up.consent.config is not up.config:
            up.consent = Consent(up.config, self._config_dir, self._login_poll)
        return up.consent

    async def _consent_for_call(self, up: _Upstream, channel: BackChannel | None) -> Connection | None:
        """Ask the caller's user to authorize (URL elicitation), then wait for the new connection.

        Raises:
            UpstreamNeedsAuth: no caller to ask, its client cannot open a URL, or the user declined.
        """
        await self._consent_of(up).ask(channel)
        with anyio.move_on_after(up.config.connect_timeout + self._login_poll):
            await self.wait_state(up.name, UpstreamState.READY)
        return up.connection

    # --- state bookkeeping -----------------------------------------------------------------------

    def _withdraw(self, up: _Upstream) -> None:
        self.registry.remove_server(up.name)
        if self.catalogs is not None:
            self.catalogs.remove_server(up.name)

    def _set_state(self, up: _Upstream, state: UpstreamState, reason: str) -> None:
        was_ready = up.state is UpstreamState.READY
        up.state, up.reason = state, reason
        logger.info("server %s: %s (%s)", up.name, state.value, reason)
        if was_ready != (state is UpstreamState.READY):
            self.availability.forget(up.name)
            self.registry.bump()
        up.state_changed.set()
        up.state_changed = anyio.Event()

    async def _wait_until(self, up: _Upstream, ready: bool) -> None:
        while (up.state is UpstreamState.READY) != ready:
            await up.state_changed.wait()

    async def _withdraw_after_grace(self, up: _Upstream) -> None:
        """A server still down after the flake window: make sessions re-evaluate, so its tools leave."""
        while True:
            await self._wait_until(up, ready=True)
            await self._wait_until(up, ready=False)
            with anyio.move_on_after(self._grace) as grace:
                await self._wait_until(up, ready=True)
            if grace.cancelled_caught:
                self.availability.forget(up.name)
                self.registry.bump()

    def _settle(self, up: _Upstream) -> None:
        if not up.settled:
            up.settled = True
            self._check_ready()

    def _check_ready(self) -> None:
        if all(up.settled for up in self._servers.values()):
            self.ready.set()

    async def _wait_replaced(self, up: _Upstream, old: Connection) -> None:
        """Wait (within connect_timeout) for the supervisor to bring up a new connection."""
        with anyio.move_on_after(up.config.connect_timeout):
            while up.state is not UpstreamState.PARKED and (
                up.state is not UpstreamState.READY or up.connection is old
            ):
                await up.state_changed.wait()
