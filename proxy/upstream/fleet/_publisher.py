"""What the fleet publishes for each member: its tools to the registry (screened by the `ToolGate`), its
resources and prompts to the catalog sink, and its last good tool list to the catalog cache.

Listings take turns (`Turns`): one answer's transient objects are gone before the next arrives, so
they do not interleave with what the registry keeps. A slow server holds the turn for at most
`LISTING_PATIENCE`, so it delays the others' listing by no more than that.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import anyio
from mcp import types

from proxy.config import UpstreamConfig
from proxy.protocol import ServerTraits
from proxy.replicated import CatalogCache  # on disk (upstream/fleet/_disk_cache.py) or in Redis
from proxy.upstream.connection import Connection
from proxy.upstream.fleet._disk_cache import DiskCatalogCache
from proxy.upstream.fleet._listing_turns import Turns
from proxy.upstream.fleet._member import Member, UpstreamState
from proxy.upstream.integrity import ToolGate

logger = logging.getLogger(__name__)

LISTING_PATIENCE = 1.0  # how long a listing waits for its turn before it goes ahead anyway


class ToolSink(Protocol):
    """Where the fleet puts each server's tools (the registry); it bumps on availability changes."""

    def set_server_tools(self, server: str, tools: Iterable[types.Tool], *, prefix: bool = True) -> Any: ...

    async def set_server_tools_sliced(
        self, server: str, tools: Iterable[types.Tool], *, prefix: bool = True
    ) -> Any: ...

    def set_servers_tools(self, catalogs: Mapping[str, tuple[Iterable[types.Tool], bool]]) -> Any: ...

    def remove_server(self, server: str) -> Any: ...

    def bump(self) -> None: ...


class CatalogSink(Protocol):
    """Where the fleet puts each server's resources, resource templates and prompts."""

    def set_server_catalog(
        self, server: str, resources: Iterable[types.Resource], templates: Iterable[types.ResourceTemplate],
        prompts: Iterable[types.Prompt], *, prefix: bool = True,
    ) -> None: ...

    def set_server_traits(self, server: str, traits: ServerTraits) -> None: ...

    def remove_server(self, server: str) -> None: ...


class Publisher:
    """Puts what a member lists where the rest of toolbridge reads it."""

    def __init__(self, registry: ToolSink, catalogs: CatalogSink | None, cache: CatalogCache | None,
                 gate: ToolGate | None = None) -> None:
        self.registry = registry
        self.catalogs = catalogs
        self.cache = cache
        self.gate = gate
        self._turns = Turns(LISTING_PATIENCE)

    async def refresh(self, up: Member, conn: Connection) -> None:
        """List every page and register the result: one `set_server_tools_sliced`, one generation bump.

        Once listed, the SDK is made to let go of the answer it still holds (`Connection.drop_last_answer`).
        """
        conn.signals.changed = False  # a notification during the listing triggers one more refresh
        async with self._turns.turn():
            tools = await conn.list_tools()
            if self.gate is not None:  # a changed tool on a pinned server waits for approval
                tools = await self.gate.screen(up.config, tools)
            if self.catalogs is not None:
                resources, templates, prompts = await conn.list_catalog()
                self.catalogs.set_server_catalog(up.name, resources, templates, prompts, prefix=up.config.prefix)
                self.catalogs.set_server_traits(up.name, conn.traits)
            await conn.drop_last_answer()  # before registering: READY follows registration with no await between
            change = await self.registry.set_server_tools_sliced(up.name, tools, prefix=up.config.prefix)
            up.record_listing(len(tools), stored=False)  # the registry changed in its last step: no await since
            if change.changed:
                logger.info("server %s: %d tools (+%d ~%d -%d)", up.name, len(tools),
                            len(change.added), len(change.replaced), len(change.removed))
            if self.cache is not None and (change.changed or not up.stored):
                await self._store(up, tools)
                up.record_listing(len(tools), stored=True)

    def republish(self, config: UpstreamConfig, tools: list[types.Tool]) -> None:
        """Register a server's tools again after an approval, and cache them (a lazy server lists from it)."""
        change = self.registry.set_server_tools(config.name, tools, prefix=config.prefix)
        if change.changed:
            logger.info("server %s: approved tool definitions registered (%d tools)", config.name, len(tools))
        if self.cache is not None:
            self.cache.store(config, tools)

    async def _store(self, up: Member, tools: list[types.Tool]) -> None:
        """Write the catalog cache; on disk in a worker thread (a dump per tool: many short steps, so the GIL
        is shared and 10,000 tools do not stop the loop for their whole write), shielded: a shutdown right
        after a listing still leaves the cache that matches it."""
        assert self.cache is not None
        if isinstance(self.cache, DiskCatalogCache):
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.cache.store, up.config, tools)
        else:
            self.cache.store(up.config, tools)

    def list_cached(self, ups: Iterable[Member]) -> list[Member]:
        """Register the members' cached catalogs, if any, in one go; the members found are listed."""
        if self.cache is None:
            return []
        found = [(up, tools) for up in ups if up.state is not UpstreamState.DISABLED
                 and (tools := self.cache.load(up.config)) is not None]
        self.registry.set_servers_tools({up.name: (tools, up.config.prefix) for up, tools in found})
        for up, tools in found:
            up.record_listing(len(tools), stored=True)
        return [up for up, _ in found]

    def withdraw(self, up: Member) -> None:
        if self.gate is not None:
            self.gate.forget(up.name)
        self.registry.remove_server(up.name)
        if self.catalogs is not None:
            self.catalogs.remove_server(up.name)
