"""The upstream fleet: the table of members, one supervisor task each (`fleet/_supervisor`), all in one task group.

The fleet adds, removes and restarts members as the config changes (hot reload), tells when every
server has settled, and routes calls and requests to a member's live connection: they run in the
caller's task, waking a lazy or stopped server and getting an OAuth server's consent on the way.
A server with a cached catalog is listed from it at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
from mcp import Client, types

from proxy.config import UpstreamConfig
from proxy.errors import NeedsBackChannel, SessionLost, UpstreamTimeout, UpstreamUnavailable
from proxy.protocol import BackChannel, NoticeSink, ProgressCallback
from proxy.replicated import CatalogCache  # on disk (upstream/fleet/_disk_cache.py) or in Redis
from proxy.upstream.connection import SubscribedUris
from proxy.upstream.fleet._availability import Availability
from proxy.upstream.fleet._member import Member, ServerStatus, UpstreamState
from proxy.upstream.fleet._publisher import CatalogSink, Publisher, ToolSink
from proxy.upstream.fleet._settings import FleetSettings
from proxy.upstream.fleet._supervisor import Supervisor
from proxy.upstream.integrity import ToolGate

logger = logging.getLogger(__name__)

T = TypeVar("T")
SUBSCRIBE_WAIT = 5.0  # seconds a subscribe waits at most for the upstream to take the URIs


class Fleet:
    """Every configured upstream, connected concurrently and kept registered in `registry`."""

    def __init__(
        self,
        upstreams: Mapping[str, UpstreamConfig],
        registry: ToolSink,
        settings: FleetSettings,
        *,
        catalogs: CatalogSink | None = None,
        notices: NoticeSink | None = None,
        cache: CatalogCache | None = None,
        gate: ToolGate | None = None,
    ) -> None:
        self.registry = registry
        self._publisher = Publisher(registry, catalogs, cache, gate)
        self.availability = Availability(check=self.is_offered, grace=settings.grace)
        self.ready = anyio.Event()  # every server settled: what the first tools/list waits for
        self.started = anyio.Event()  # every server tried: what a one-shot command waits for
        self.settings = settings
        self._servers = {name: self._new_upstream(config) for name, config in upstreams.items()}
        for name, config in upstreams.items():
            registry.set_overrides(name, config.overrides)
        self._desired: dict[str, UpstreamConfig] = dict(upstreams)
        self._desired_changed = anyio.Event()
        self._supervisor = Supervisor(self._servers, self._publisher, registry, self.availability, self._check_ready,
                                      settings, notices)

    def _new_upstream(self, config: UpstreamConfig, subscribed: SubscribedUris | None = None) -> Member:
        """A member for `config`; `subscribed`: the sessions' subscriptions, which outlive a restart."""
        state: dict[str, Any] = {} if config.enabled else {
            "state": UpstreamState.DISABLED, "reason": "disabled in config", "settled": True, "tried": True}
        return Member(config, transport="stdio" if config.is_stdio else (config.transport or "auto"),
                      lazy=self.settings.lazy if config.lazy is None else config.lazy,
                      idle_timeout=(config.idle_timeout or self.settings.idle_timeout) if config.is_stdio else None,
                      subscribed=subscribed or SubscribedUris(), **state)

    # --- public API ------------------------------------------------------------------------------

    def republish(self, config: UpstreamConfig, tools: list[types.Tool]) -> None:
        """Register a server's tools anew (and cache them): its held tools were approved."""
        self._publisher.republish(config, tools)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Supervise every enabled upstream until cancelled; reports started at once.

        Applies `update()`s as they come: only added, removed and changed servers are touched.
        """
        try:
            async with anyio.create_task_group() as tg:
                self._supervisor.list_cached(self._servers.values())
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
        """Stop removed and changed servers, start added and changed ones; leave the rest alone (a server
        whose overrides alone changed is only shown anew: its tools are registered again, not relisted)."""
        for name in sorted(set(self._servers) - set(self._desired)):
            logger.info("server %s: removed from the config; stopping it", name)
            self._servers.pop(name).scope.cancel()
        new: list[Member] = []
        for name, config in sorted(self._desired.items()):
            old = self._servers.get(name)
            self.registry.set_overrides(name, config.overrides)  # shown anew at once, as its tools are listed
            if old is not None and old.config.model_copy(update={"overrides": config.overrides}) == config:
                old.config = config  # at most its overrides changed: what it lists did not
                continue
            if old is not None:
                logger.info("server %s: its config changed; restarting it", name)
                old.scope.cancel()
            up = self._servers[name] = self._new_upstream(config, old.subscribed if old is not None else None)
            new.append(up)
        self._supervisor.list_cached(new)  # one registration for all of them
        for up in new:
            self._start(tg, up)
        self._check_ready()

    def _start(self, tg: anyio.abc.TaskGroup, up: Member) -> None:
        if up.state is UpstreamState.DISABLED:
            self._publisher.withdraw(up)
            return
        tg.start_soon(self._supervisor.run, up, name=f"upstream {up.name}")

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
        (it restarted) is retried once after reconnecting. A handshake-era caller's call to a
        `protocol: auto` server that speaks both eras goes over a handshake-era connection, where the
        server has a back channel (`fleet/_handshake_connection`); a 2026-era caller's call that fails
        there for want of one is retried once over that connection. A call to a server that needs the
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
        async with up.in_use():
            if up.state is UpstreamState.NEEDS_AUTH:
                await self._supervisor.consent_for_call(up, channel)
            conn = await up.connection_for(channel)
            try:
                return await conn.call_tool(raw_name, arguments, timeout=up.config.timeout,
                                            progress_callback=progress_callback, channel=channel)
            except SessionLost:
                await up.wait_replaced(conn)
            except NeedsBackChannel:
                twin = await up.with_back_channel(conn)
                if twin is None:
                    raise
                return await twin.call_tool(raw_name, arguments, timeout=up.config.timeout,
                                            progress_callback=progress_callback, channel=channel)
            except UpstreamUnavailable:
                if up.consent is None or not up.consent.needed:
                    raise
                # the token went mid-call: refused with a 401, the call never ran
                await self._supervisor.consent_for_call(up, channel)
            conn = await up.connection_for(channel)
            return await conn.call_tool(raw_name, arguments, timeout=up.config.timeout,
                                        progress_callback=progress_callback, channel=channel)

    async def request(
        self, server: str, what: str, operation: Callable[[Client], Awaitable[T]], channel: BackChannel | None = None
    ) -> T:
        """Run a request other than a tool call (read, get, complete, subscribe, set level) on `server`.

        It waits for a starting or restarting server as a tool call does, bounded the same way: a server listed
        from its cached catalog (an MCP App's `ui://` resource with it) is still connecting at first. A
        handshake-era caller's request goes where its tool calls go.

        Raises:
            UpstreamUnavailable: the server is not connected after that wait, or died meanwhile.
            UpstreamTimeout: no answer within the server's `timeout`.
            UpstreamError: the upstream answered with an error.
        """
        up = self._servers.get(server)
        if up is None:
            raise UpstreamUnavailable(server, "no such upstream")
        async with up.in_use():
            conn = await up.connection_for(channel)
            with anyio.move_on_after(up.config.timeout):
                return await conn.request(what, operation, channel)
        raise UpstreamTimeout(server, f"{what} gave no answer within {up.config.timeout:g} s; cancelled")

    async def subscribe(self, server: str, uris: Sequence[str]) -> None:
        """Ask `server` for updates of `uris` from now on, through every reconnect (see `connection/_subscribed`).

        Returns once the live connection asked for them, so an update right after the caller's acknowledgment
        reaches it, or after `SUBSCRIBE_WAIT` at most (a server slow to take them must not hold up the caller's
        acknowledgment); a server that is down is asked when it is back.
        """
        up = self._servers.get(server)
        if up is None:
            return
        up.subscribed.add(uris)
        if up.state is not UpstreamState.READY:
            return
        with anyio.move_on_after(min(up.config.timeout, SUBSCRIBE_WAIT)):
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

    # --- readiness -------------------------------------------------------------------------------

    def _check_ready(self) -> None:
        if all(up.settled for up in self._servers.values()):
            self.ready.set()
        if all(up.tried for up in self._servers.values()):
            self.started.set()
