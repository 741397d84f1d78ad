"""The running gateway, wired in one place: config → registry → fleet → views → downstream server.

`run_gateway` owns the fleet (and, with `tool_search.semantic: on`, the background embedding of
new tools) in one task group; every front end — `serve` over stdio or HTTP, and the CLI's one-shot
commands — runs inside it, so they all see the same fleet the same way.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.stdio import stdio_server

from proxy.config import Config
from proxy.downstream import (
    ChangeNotifier,
    Handlers,
    HttpApp,
    ProtectedResource,
    build_server,
    serve_http,
    transport_security,
)
from proxy.registry import Registry
from proxy.search import SemanticIndex
from proxy.upstream import Fleet
from proxy.views import Views

logger = logging.getLogger(__name__)


@dataclass
class Gateway:
    config: Config
    registry: Registry
    fleet: Fleet
    views: Views

    async def wait_until_ready(self, timeout: float) -> bool:
        """Wait (bounded) until every upstream has registered or failed once."""
        with anyio.move_on_after(timeout):
            await self.fleet.ready.wait()
        return self.fleet.ready.is_set()

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "servers": {s.name: s.state.value for s in self.fleet.status()}}


def embedding_cache_dir(config: Config) -> Path:
    """`$TOOLBRIDGE_CACHE_DIR/embeddings`, else `<config dir>/.cache/embeddings`."""
    root = os.environ.get("TOOLBRIDGE_CACHE_DIR")
    return (Path(root) if root else config.directory / ".cache") / "embeddings"


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


@asynccontextmanager
async def run_gateway(
    config: Config, *, context_tokens: int | None = None, log_dir: Path | None = None
) -> AsyncIterator[Gateway]:
    """Start every upstream (concurrently, in the background) and yield the gateway."""
    registry = Registry()
    fleet = Fleet(config.upstreams, registry, config_dir=config.directory,
                  log_dir=log_dir or config.directory / "logs")
    views = Views(registry, config.toolsets, fleet.availability, default_context_tokens=context_tokens,
                  cache_dir=embedding_cache_dir(config))
    async with anyio.create_task_group() as tg:
        await tg.start(fleet.run)
        if views.semantic is not None:
            await tg.start(keep_embeddings, views.semantic, registry)
        try:
            yield Gateway(config, registry, fleet, views)
        finally:
            tg.cancel_scope.cancel()


@dataclass(frozen=True)
class HttpOptions:
    host: str = "127.0.0.1"
    port: int = 8765
    auth_token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()


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


async def serve(
    config: Config, *, context_tokens: int | None = None, profile: str | None = None, http: HttpOptions | None = None
) -> None:
    """`toolbridge serve`: the gateway and one downstream transport (stdio, or HTTP when `http`)."""
    async with anyio.create_task_group() as tg:
        shutdown = _Shutdown(tg.cancel_scope)
        tg.start_soon(shutdown.wait_for_signal)
        async with run_gateway(config, context_tokens=context_tokens) as gateway:
            notifier = ChangeNotifier(gateway.views)
            await tg.start(notifier.run)
            handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready,
                                startup_wait=config.toolsets.startup_wait, profile=profile)
            server = build_server(handlers)
            if http is None:
                async with stdio_server() as (read, write):
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
                )
                shutdown.drain = anyio.Event()
                logger.info("serving Streamable HTTP on http://%s:%s/mcp", http.host, http.port)
                await serve_http(app, http.host, http.port, stop=shutdown.drain)
        tg.cancel_scope.cancel()
