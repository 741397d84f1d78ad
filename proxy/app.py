"""The running gateway, wired in one place: config → registry → fleet → views → downstream server.

`run_gateway` owns the fleet (and, with `tool_search.semantic: on`, the background embedding of
new tools) in one task group; every front end — `serve` over stdio or HTTP, and the CLI's one-shot
commands — runs inside it, so they all see the same fleet the same way.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types

from proxy.catalogs import Catalogs
from proxy.config import Config, keep_last_good, load_config, reload_note
from proxy.console import Console, ConsoleSources
from proxy.downstream import (
    CallRecord,
    ChangeNotifier,
    Handlers,
    HttpApp,
    LargeResults,
    Promoter,
    ProtectedResource,
    ReplicaMarker,
    RequestStates,
    TaskIds,
    Tasks,
    build_server,
    new_replica_id,
    serve_http,
    stdio_transport,
    transport_security,
)
from proxy.errors import remember_secrets
from proxy.ops import AuditLog, Metrics, reload_on_sighup, status_report, watch_config
from proxy.protocol import Notice, NoticeSink
from proxy.registry import Registry
from proxy.replicated import Limits, SharedState, open_shared_state
from proxy.upstream import DiskCatalogCache, FingerprintStore, Fleet, FleetSettings, ToolGate, config_key
from proxy.views import Views

if TYPE_CHECKING:
    from proxy.search import SemanticIndex

logger = logging.getLogger(__name__)

NOTICE_BUFFER = 1000


@dataclass
class Gateway:
    config: Config
    registry: Registry
    fleet: Fleet
    views: Views
    notices: MemoryObjectReceiveStream[Notice]
    """What the upstreams said that no call claimed, for the downstream handlers to deliver."""
    shared: SharedState
    gate: ToolGate
    limits: Limits

    async def wait_until_ready(self, timeout: float) -> bool:
        """Wait (bounded) until every upstream has connected or failed once (a lazy one is not started)."""
        with anyio.move_on_after(timeout):
            await self.fleet.started.wait()
        return self.fleet.started.is_set()

    def health(self) -> dict[str, Any]:
        """`starting` until every upstream registered or failed once (a readiness probe waits for it), then `ok`."""
        return {"status": "ok" if self.fleet.ready.is_set() else "starting",
                "servers": {s.name: s.state.value for s in self.fleet.status()}}

    def status(self) -> dict[str, Any]:
        return status_report(self.config, self.fleet, self.views, self.gate.store, self.limits)

    def reload(self) -> None:
        """Re-read the config dir: start added servers, stop removed ones, restart changed ones, and
        re-assemble the surfaces for an edited `toolsets.yaml`; a broken file keeps its last good settings."""
        config = keep_last_good(self.config, load_config(self.config.directory))
        remember_secrets(config.secrets)
        for problem in config.problems:
            logger.error("config: %s (%s)", problem, reload_note(self.config, problem))
        if config.toolsets.auth != self.config.toolsets.auth:  # the HTTP app was built with the old one
            logger.warning("config: toolsets.yaml: 'auth:' changes take effect at the next restart")
            config.toolsets = config.toolsets.model_copy(update={"auth": self.config.toolsets.auth})
        self.fleet.update(config.upstreams)
        self.views.update_toolsets(config.toolsets)
        self.limits.update(config.toolsets.limits)
        self.config = config


def cache_dir(config: Config) -> Path:
    """`$TOOLBRIDGE_CACHE_DIR`, else `<config dir>/.cache`."""
    root = os.environ.get("TOOLBRIDGE_CACHE_DIR")
    return Path(root) if root else config.directory / ".cache"


def fingerprints_path(directory: Path) -> Path:
    """Trust state, not a cache: clearing `.cache` must not re-trust every tool."""
    return directory / ".toolbridge" / "fingerprints.json"


def embedding_cache_dir(config: Config) -> Path:
    return cache_dir(config) / "embeddings"


async def embed_pending(index: SemanticIndex) -> None:
    """Embed every server whose tools changed, one at a time, off the event loop.

    A failure is logged; sessions that can search that server then rank lexically until its tools change.
    """
    for server, docs in list(index.pending.items()):
        try:
            vectors = await anyio.to_thread.run_sync(index.embed, docs, anyio.from_thread.check_cancelled)
        except Exception:
            logger.exception("embedding the tools of server %s failed; searches over it stay lexical", server)
            vectors = None
        index.install(server, docs, vectors)


async def keep_embeddings(
    index: SemanticIndex, registry: Registry, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Embed new tools whenever the registry changes, for as long as the gateway runs."""
    task_status.started()
    while True:
        since = registry.generation
        await embed_pending(index)
        await registry.wait_for_change(since)


def _dropping_when_full(stream: MemoryObjectSendStream[Notice]) -> NoticeSink:
    """A flood of notices never blocks the upstream that sends it: past `NOTICE_BUFFER` waiting, new ones are
    dropped (said once per server, until one gets through again)."""
    dropping: set[str] = set()

    async def sink(server: str, notification: types.ServerNotification) -> None:
        try:
            stream.send_nowait((server, notification))
            dropping.discard(server)
        except anyio.WouldBlock:
            if server not in dropping:
                dropping.add(server)
                logger.warning("server %s: %d notices wait to be delivered; dropping new ones", server, NOTICE_BUFFER)

    return sink


@asynccontextmanager
async def run_gateway(
    config: Config, *, context_tokens: int | None = None, log_dir: Path | None = None, redis_url: str | None = None,
    audit: AuditLog | None = None,
) -> AsyncIterator[Gateway]:
    """Start every upstream (concurrently, in the background) and yield the gateway; `audit` records every tool
    definition change the gate sees.

    State shared with other replicas lives in Redis at `redis_url`, else `toolsets.yaml`'s, else in this process.
    """
    registry = Registry()
    catalogs = Catalogs(registry)
    notices, unclaimed = anyio.create_memory_object_stream[Notice](NOTICE_BUFFER)
    settings = config.toolsets
    # the senders' end closes before the receivers': the handlers' delivery then ends quietly
    async with unclaimed, notices, open_shared_state(redis_url or settings.redis_url) as shared, \
            anyio.create_task_group() as tg:
        shared_cache = shared.catalog_cache(config_key)
        if shared_cache is not None:
            await tg.start(shared_cache.run)  # its mirror is filled before the fleet reads it
        gate = ToolGate(FingerprintStore(fingerprints_path(config.directory)),
                        audit.record_tool_change if audit is not None else None)
        running = FleetSettings(config.directory, log_dir or config.directory / "logs", lazy=settings.lazy,
                                idle_timeout=settings.idle_timeout, spawn_concurrency=settings.spawn_concurrency)
        fleet = Fleet(config.upstreams, registry, running, gate=gate, catalogs=catalogs,
                      notices=_dropping_when_full(notices),
                      cache=shared_cache or DiskCatalogCache(cache_dir(config) / "catalogs"))
        views = Views(registry, config.toolsets, fleet.availability, default_context_tokens=context_tokens,
                      cache_dir=embedding_cache_dir(config), catalogs=catalogs, settled=fleet.ready)
        limits = Limits(settings.limits, shared.limit_store())
        await tg.start(limits.run)
        await tg.start(gate.follow, fleet.republish)
        await tg.start(fleet.run)
        await tg.start(views.index_when_idle)
        if views.semantic is not None:
            await tg.start(keep_embeddings, views.semantic, registry)
        try:
            yield Gateway(config, registry, fleet, views, unclaimed, shared, gate, limits)
        finally:
            tg.cancel_scope.cancel()


@dataclass(frozen=True)
class HttpOptions:
    """How `serve` listens over HTTP; `host` off loopback needs `auth_token` (checked by the CLI)."""

    host: str = "127.0.0.1"
    port: int = 8765
    auth_token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    replica_id: str | None = None  # behind a load balancer: the marker in this replica's session ids


@dataclass
class _Shutdown:
    """What SIGTERM/SIGINT does: cancel everything, unless a front end asked for a graceful stop."""

    scope: anyio.CancelScope
    drain: anyio.Event | None = None

    async def wait_for_signal(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                logger.info("received %s; shutting down", signal.Signals(signum).name)
                if self.drain is not None:
                    self.drain.set()
                else:
                    self.scope.cancel()
                return


def _call_observers(metrics: Metrics, audit: AuditLog | None) -> Callable[[CallRecord], None]:
    def observe(record: CallRecord) -> None:
        metrics.observe(record)
        if audit is not None:
            audit.record(record)

    return observe


async def serve(
    config: Config,
    *,
    context_tokens: int | None = None,
    profile: str | None = None,
    http: HttpOptions | None = None,
    watch: bool = True,
    redis_url: str | None = None,
) -> None:
    """`toolbridge serve`: the gateway and one downstream transport (stdio, or HTTP when `http`).

    With `watch`, edits to `upstreams/` and `toolsets.yaml` apply while serving; SIGHUP always does.
    """
    audit = AuditLog(config.directory, config.toolsets.audit) if config.toolsets.audit else None
    try:
        await _serve(config, context_tokens, profile, http, watch, audit, redis_url)
    finally:
        if audit is not None:
            audit.close()


async def _tasks(gateway: Gateway, http: HttpOptions | None) -> Tasks:
    """Task ids signed with the replicas' shared key; a remote upstream's tasks are any replica's to serve."""
    replica = http.replica_id if http is not None and http.replica_id else new_replica_id()

    def shared(server: str) -> bool:
        upstream = gateway.config.upstreams.get(server)
        return upstream is not None and upstream.url is not None

    return Tasks(gateway.fleet, TaskIds(await gateway.shared.signing_key(), replica), shared)


async def _serve(
    config: Config, context_tokens: int | None, profile: str | None, http: HttpOptions | None, watch: bool,
    audit: AuditLog | None, redis_url: str | None,
) -> None:
    async with anyio.create_task_group() as tg:
        shutdown = _Shutdown(tg.cancel_scope)
        tg.start_soon(shutdown.wait_for_signal)
        async with run_gateway(config, context_tokens=context_tokens, redis_url=redis_url, audit=audit) as gateway:
            notifier = ChangeNotifier(gateway.views, Promoter(gateway.views, gateway.shared.promotions()))
            await tg.start(notifier.run)
            metrics = Metrics(gateway.fleet, gateway.views, notifier, gateway.gate.store, gateway.limits,
                              top_tools=config.toolsets.metrics.top_tools)
            handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready,
                                fleet_started=gateway.fleet.started,
                                startup_wait=config.toolsets.startup_wait, profile=profile,
                                on_call=_call_observers(metrics, audit), limits=gateway.limits,
                                large_results=LargeResults(gateway.shared.results,
                                                           config.toolsets.large_results.max_chars),
                                tasks=await _tasks(gateway, http),
                                request_states=RequestStates(await gateway.shared.signing_key(),
                                                             http.replica_id if http is not None else None),
                                notices=gateway.notices)
            await tg.start(handlers.run)
            tg.start_soon(reload_on_sighup, gateway.reload)
            if watch:
                tg.start_soon(watch_config, config.directory, gateway.reload)
            server = build_server(handlers)
            if http is None:
                async with stdio_transport() as (read, write):
                    await server.run(read, write, server.create_initialization_options())
            else:
                auth = config.toolsets.auth
                resource = ProtectedResource(auth, config.directory) if auth is not None else None
                app = HttpApp(
                    server,
                    security=transport_security(http.host, http.allowed_hosts, http.allowed_origins),
                    auth_token=http.auth_token,
                    has_profile=gateway.views.has_profile,
                    health=gateway.health,
                    resource=resource,
                    status=gateway.status,
                    metrics=metrics.exposition,
                    replica=ReplicaMarker(http.replica_id) if http.replica_id else None,
                    forget=handlers.forget,
                    profiles=lambda: gateway.views.toolsets.profiles,
                    console=Console(ConsoleSources(gateway.status, gateway.views, metrics, gateway.gate.store,
                                                   audit.path if audit is not None else None)),
                )
                shutdown.drain = anyio.Event()
                logger.info("serving Streamable HTTP on http://%s:%s/mcp", http.host, http.port)
                await serve_http(app, http.host, http.port, stop=shutdown.drain)
        tg.cancel_scope.cancel()
