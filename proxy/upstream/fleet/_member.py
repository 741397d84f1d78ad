"""One member of the fleet: an upstream server's state, its live connection, and the waits a call makes.

The fleet's supervisor changes a member's state, the member itself what a call or a listing changes
(`in_use`, `record_listing`); a call otherwise only reads it and waits on `state_changed`,
so every wait here is bounded by the member's own config (`connect_timeout`, `restart_wait`).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from mcp import types

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamUnavailable
from proxy.protocol import BackChannel
from proxy.upstream.connection import Connection, SubscribedUris, TransportChoice
from proxy.upstream.fleet._handshake_connection import HandshakeConnection
from proxy.upstream.oauth import Consent

logger = logging.getLogger(__name__)


class UpstreamState(enum.Enum):
    LAZY = "lazy"  # listed from the cached catalog, not started yet
    STARTING = "starting"
    READY = "ready"  # running
    STOPPED = "stopped"  # stopped when idle; still listed, started again by the next call
    BACKOFF = "backoff"
    PARKED = "parked"
    DISABLED = "disabled"
    NEEDS_AUTH = "needs-auth"  # an OAuth upstream waiting for `toolbridge login`; its known tools stay offered


STARTABLE = (UpstreamState.LAZY, UpstreamState.STOPPED)
_DRAIN_POLL = 0.05  # seconds between two looks at a connection's calls in flight, before it is closed
_WAKING = (*STARTABLE, UpstreamState.STARTING)  # what a call waits through before it can be sent


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
class Member:
    config: UpstreamConfig
    state: UpstreamState = UpstreamState.STARTING
    reason: str = "starting"
    last_error: str | None = None
    transport: TransportChoice = "auto"
    handshake_only: bool = False  # a stdio `protocol: auto` server a handshake-era caller needed: in that era now
    connection: Connection | None = None
    handshake: HandshakeConnection | None = None  # an HTTP `protocol: auto` 2026-era connection's handshake-era twin
    tool_count: int = 0
    failures: int = 0
    settled: bool = False  # registered (live or from the cache) or failed once
    tried: bool = False  # connected or failed once, or lazy: what a one-shot command waits for
    state_changed: anyio.Event = field(default_factory=anyio.Event)
    lazy: bool = False
    idle_timeout: float | None = None
    listed: bool = False  # its tools are in the registry (from the cache or a connection)
    stored: bool = False  # the cache holds what the registry holds
    used: bool = False  # a call asked for it since it last started
    pending: int = 0  # calls waiting for it or running on it
    last_used: float = 0.0
    wake: anyio.Event = field(default_factory=anyio.Event)
    restarts: int = 0
    connected_since: float | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    consent: Consent | None = None  # an `auth: oauth` upstream's, once it first connects
    subscribed: SubscribedUris = field(default_factory=SubscribedUris)  # asked for again by each connection

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def offered(self) -> bool:
        """Its tools are offered: it runs, or it is listed and a call would start it (or ask for consent)."""
        return self.state in (UpstreamState.READY, UpstreamState.NEEDS_AUTH) or self.state in STARTABLE or (
            self.state is UpstreamState.STARTING and self.listed)

    @property
    def idle_limit(self) -> float | None:
        """How long the server may sit unused: 0 for a lazy one started only to fill the cache."""
        if self.lazy and not self.used:
            return 0.0
        return self.idle_timeout

    def status(self) -> ServerStatus:
        conn = self.connection
        return ServerStatus(self.name, self.state, self.reason, self.tool_count if self.offered else 0,
                            conn.transport if conn else self.transport, conn.protocol_version if conn else None,
                            self.last_error, self.restarts, self.connected_since)

    async def wait_for(self, *states: UpstreamState) -> None:
        """Wait until it is in one of `states` (bound it with `fail_after`)."""
        while self.state not in states:
            await self.state_changed.wait()

    async def wait_offered(self, offered: bool) -> None:
        while self.offered != offered:
            await self.state_changed.wait()

    @asynccontextmanager
    async def in_use(self) -> AsyncIterator[None]:
        """Hold it in use (it is not stopped for idleness meanwhile), starting it first if lazy or stopped."""
        self.pending += 1
        self.used = True
        try:
            await self.until_started()
            yield
        finally:
            self.pending -= 1
            self.last_used = anyio.current_time()

    def record_listing(self, tools: int, *, stored: bool) -> None:
        """Its `tools` are in the registry (from a connection, or from the cache, which then holds them)."""
        self.tool_count, self.listed = tools, True
        self.stored = self.stored or stored

    async def until_started(self) -> None:
        """Start a lazy or stopped server, and wait (within its connect_timeout) while it connects."""
        if self.state not in _WAKING:
            return
        if self.state in STARTABLE:
            self.wake.set()
        with anyio.move_on_after(self.config.connect_timeout):
            while self.state in _WAKING:
                await self.state_changed.wait()

    async def live_connection(self) -> Connection:
        """Its connection, after a bounded wait if it is (re)starting (SPEC §6.7).

        Raises:
            UpstreamUnavailable: still not connected after the wait, or parked or disabled.
        """
        waiting = (UpstreamState.STARTING, UpstreamState.BACKOFF)
        if self.state in waiting:
            bound = self.config.connect_timeout if self.state is UpstreamState.STARTING else self.config.restart_wait
            with anyio.move_on_after(bound):
                while self.state in waiting:
                    await self.state_changed.wait()
        if self.state is not UpstreamState.READY or self.connection is None:
            raise UpstreamUnavailable(self.name, f"temporarily unavailable ({self.reason})")
        return self.connection

    def client_mode(self, auto: str) -> str:
        """The SDK `Client` mode to connect with; `auto`: the fleet's for a `protocol: auto` server."""
        if self.config.protocol != "auto":
            return self.config.client_mode
        return "legacy" if self.handshake_only else auto

    async def connection_for(self, channel: BackChannel | None) -> Connection:
        """The connection for a request with this back channel: a handshake-era caller that can answer a back-channel
        request (it declared sampling, elicitation or roots) reaches a `protocol: auto` server that speaks both
        eras in the handshake era, where the server has a back channel too (see `with_back_channel`); any other
        request goes to `connection`, whose requests carry the caller's capabilities.

        Raises:
            UpstreamUnavailable: as `live_connection`.
        """
        if self.handshake_only:  # switching eras: no new request on the old connection, a wait as long as a start's
            with anyio.move_on_after(self.config.connect_timeout):
                while self.state is not UpstreamState.PARKED and not (
                    self.state is UpstreamState.READY and self.connection is not None and not self.connection.modern
                ):
                    await self.state_changed.wait()
        conn = await self.live_connection()
        if channel is not None and channel.handshake_era and _answers_back(channel.capabilities):
            return await self.with_back_channel(conn) or conn
        return conn

    async def with_back_channel(self, conn: Connection) -> Connection | None:
        """A handshake-era connection instead of the 2026-era `conn`; None when there is none (`protocol` is
        pinned, `conn` is handshake-era already, or the server does not speak that era) or the server declared
        the tasks extension, a 2026-only feature a caller of either era gets from it only there.

        Over HTTP it is a second session beside `conn` (`_handshake_connection`), which the server's one process
        serves alike. A stdio server is a process per connection, whose state a second one would not share
        (a tool a call adds, a resource it changes): it is reconnected in the handshake era for good instead,
        once the calls in flight on `conn` are answered, so no call of either era is cut off.
        """
        if not conn.modern or self.config.protocol != "auto" or conn.makes_tasks:
            return None  # one that makes tasks would make none in the handshake era: its rounds ask the caller
        link = self.handshake
        if link is not None and link.first is conn:
            return await link.get(self.config.connect_timeout)
        if not self.config.is_stdio:
            return None
        if not self.handshake_only:
            logger.info("server %s: a handshake-era caller needs its back channel: reconnecting it in the "
                        "handshake era once its calls in flight are answered", self.name)
            self.handshake_only = True
            with anyio.move_on_after(self.config.timeout):
                while conn.calls_in_flight:
                    await anyio.sleep(_DRAIN_POLL)
            conn.signals.mark_lost()
        await self.wait_replaced(conn)
        replaced = self.connection
        return replaced if replaced is not None and replaced is not conn and self.state is UpstreamState.READY else None

    async def wait_replaced(self, old: Connection) -> None:
        """Wait (within connect_timeout) for the supervisor to bring up a new connection."""
        with anyio.move_on_after(self.config.connect_timeout):
            while self.state is not UpstreamState.PARKED and (
                self.state is not UpstreamState.READY or self.connection is old
            ):
                await self.state_changed.wait()


def _answers_back(capabilities: types.ClientCapabilities) -> bool:
    return any(c is not None for c in (capabilities.sampling, capabilities.elicitation, capabilities.roots))
