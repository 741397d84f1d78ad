"""The running gateway: config → registry → fleet → catalog, owned by one task group.

Every front end (stdio, HTTP, and the CLI's one-shot commands) runs inside `run_gateway`, so
they all see the same fleet the same way. With `tool_search.semantic: on`, a background task of the
same task group embeds new tools in a worker thread; searches rank lexically until it catches up.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.to_thread

from proxy.catalog import Catalog
from proxy.config import Config
from proxy.fleet import Fleet
from proxy.registry import Registry
from proxy.semantic import SemanticIndex

logger = logging.getLogger(__name__)


@dataclass
class Gateway:
    config: Config
    registry: Registry
    fleet: Fleet
    catalog: Catalog

    async def wait_until_ready(self, timeout: float) -> bool:
        """Wait (bounded) until every upstream has registered or failed once."""
        with anyio.move_on_after(timeout):
            await self.fleet.ready.wait()
        return self.fleet.ready.is_set()


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
    fleet = Fleet(
        config.upstreams,
        registry,
        config_dir=config.directory,
        log_dir=log_dir or config.directory / "logs",
    )
    catalog = Catalog(
        registry,
        config.toolsets,
        fleet.availability,
        default_context_tokens=context_tokens,
        cache_dir=embedding_cache_dir(config),
    )
    async with anyio.create_task_group() as tg:
        await tg.start(fleet.run)
        if catalog.semantic is not None:
            await tg.start(keep_embeddings, catalog.semantic, registry)
        try:
            yield Gateway(config, registry, fleet, catalog)
        finally:
            tg.cancel_scope.cancel()
