"""The running gateway: config → registry → fleet → catalog, owned by one task group.

Every front end (stdio, HTTP, and the CLI's one-shot commands) runs inside `run_gateway`, so
they all see the same fleet the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from proxy.catalog import Catalog
from proxy.config import Config
from proxy.fleet import Fleet
from proxy.registry import Registry


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
    catalog = Catalog(registry, config.toolsets, fleet.availability, default_context_tokens=context_tokens)
    async with anyio.create_task_group() as tg:
        await tg.start(fleet.run)
        try:
            yield Gateway(config, registry, fleet, catalog)
        finally:
            tg.cancel_scope.cancel()
