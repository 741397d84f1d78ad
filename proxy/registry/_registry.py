"""The live registry of upstream tools, grouped in `mcp-<server>` toolsets.

Synchronous by design: it lives on one event loop, so it needs no locks. Every change bumps
`generation` and wakes whoever waits in `wait_for_change`, which is how sessions learn that the
`tools/list` they were given may be stale.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import anyio
from mcp import types

from proxy.config import ToolOverride
from proxy.names import BRIDGE_NAMES, NameSource, assign_names, server_toolset
from proxy.registry._entries import ToolEntry, overridden_entries, servable_entries
from proxy.registry._steps import run_sliced, run_steps

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerChange:
    """What one `set_server_tools` call did; `changed` is False when nothing moved."""

    server: str
    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.replaced or self.removed)


Listener = Callable[[str, Sequence[ToolEntry]], None]


class Registry:
    """Qualified name → tool, the `mcp-<server>` toolsets, and a generation counter."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolEntry] = {}
        self._by_server: dict[str, dict[str, ToolEntry]] = {}
        self._listeners: list[Listener] = []
        # Each server's tools as it listed them, by raw name, and whether its names are prefixed.
        self._listed: dict[str, tuple[dict[str, ToolEntry], bool]] = {}
        self._overrides: dict[str, Mapping[str, ToolOverride]] = {}
        # Each server's tools as shown, by the names overrides give them: re-registered when names move.
        self._sources: dict[str, tuple[NameSource, dict[str, ToolEntry]]] = {}
        self._definitions: dict[bytes, bytes] = {}  # every entry's definition, each distinct one once
        self._warned: set[str] = set()
        self._app_servers: set[str] = set()
        self._changed = anyio.Event()
        self.generation = 0

    # --- reading -----------------------------------------------------------------------------

    def get(self, name: str) -> ToolEntry | None:
        return self._tools.get(name)

    @property
    def tools(self) -> Mapping[str, ToolEntry]:
        """Every registered tool by qualified name (a read-only live view)."""
        return MappingProxyType(self._tools)

    def server_tools(self, server: str) -> Mapping[str, ToolEntry]:
        return MappingProxyType(self._by_server.get(server, {}))

    def listed_tools(self, server: str) -> Mapping[str, ToolEntry]:
        """The server's tools as it listed them (before its overrides), by raw name."""
        return MappingProxyType(self._listed[server][0] if server in self._listed else {})

    @property
    def servers(self) -> list[str]:
        return sorted(self._by_server)

    @property
    def app_servers(self) -> frozenset[str]:
        """The servers serving MCP Apps: a tool of theirs has a UI or is for apps only."""
        return frozenset(self._app_servers)

    def toolsets(self) -> dict[str, frozenset[str]]:
        """Every dynamic toolset: `mcp-<server>` → its qualified names (only non-empty ones)."""
        return {server_toolset(s): frozenset(tools) for s, tools in self._by_server.items()}

    # --- writing -----------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """Call `listener(server, entries)` after each change of that server's tools.

        Listeners run after the generation moved, so they see the new state; one that raises is
        logged and does not stop the others (nor undo the change).
        """
        self._listeners.append(listener)

    def set_overrides(self, server: str, overrides: Mapping[str, ToolOverride]) -> ServerChange:
        """Show the server's tools as `overrides` (raw name → override) says, from now on; its tools listed
        already are registered again at once (a hot reload of its file needs no new listing)."""
        if dict(overrides) == dict(self._overrides.get(server, {})):
            return ServerChange(server)
        if overrides:
            self._overrides[server] = dict(overrides)
        else:
            self._overrides.pop(server, None)
        if server not in self._listed:
            return ServerChange(server)
        by_raw, prefix = self._listed[server]
        return self._register(server, by_raw, prefix)

    def set_server_tools(self, server: str, tools: Iterable[types.Tool], *, prefix: bool = True) -> ServerChange:
        """Make `tools` the server's whole tool set, each as its override shows it (`set_overrides`): add new,
        replace changed, drop vanished.

        Bumps the generation once if anything changed. Names owned by another server, and the
        reserved bridge names, are refused and logged, never raised. With `prefix=False` the tools
        keep their raw names where `names.assign_names` allows; a server whose names that decision
        moves (one earlier in name order arrived or left, or a second server now spells one of its
        qualified names alike) is re-registered too.
        """
        return self._register(server, run_steps(servable_entries(server, tools, self._definitions)), prefix)

    async def set_server_tools_sliced(
        self, server: str, tools: Iterable[types.Tool], *, prefix: bool = True
    ) -> ServerChange:
        """`set_server_tools`, its per-tool work (checks, cleaning, compression) done first, yielding to the
        loop every `SLICE_SECONDS`: thousands of tools must not stop every other upstream's calls for seconds. The
        registry itself changes at the end, in one step."""
        return self._register(server, await run_sliced(servable_entries(server, tools, self._definitions)), prefix)

    def _register(self, server: str, by_raw: dict[str, ToolEntry], prefix: bool) -> ServerChange:
        by_name = self._set_source(server, by_raw, prefix)
        self._forget_definitions()
        assigned = self._assign()
        self._follow(assigned, {server})  # a server losing a raw name to this one lets go first
        change = self._apply(server, by_name, assigned.get(server, {}))
        self._follow(assigned, {server})  # and one gaining a name this one let go takes it now
        return change

    def set_servers_tools(self, catalogs: Mapping[str, tuple[Iterable[types.Tool], bool]]) -> None:
        """`set_server_tools(server, tools, prefix=prefix)` for each `server: (tools, prefix)`, with one
        naming pass for all of them: registering a fleet at start (from its cached catalogs) then costs
        time in proportion to its tools, not to its servers times its tools. Nothing to register: no pass."""
        if not catalogs:
            return
        kept = {server: self._set_source(server, run_steps(servable_entries(server, tools, self._definitions)),
                                         prefix)
                for server, (tools, prefix) in catalogs.items()}
        self._forget_definitions()
        assigned = self._assign()
        self._follow(assigned, set(kept))
        for server, by_name in kept.items():
            self._apply(server, by_name, assigned.get(server, {}))
        self._follow(assigned, set())  # one of them refused a name another let go after it takes it now

    def _set_source(self, server: str, by_raw: dict[str, ToolEntry], prefix: bool) -> dict[str, ToolEntry]:
        """Record what the server listed; its tools by the names they are shown by."""
        if not by_raw:
            self._listed.pop(server, None)
            self._sources.pop(server, None)
            return by_raw
        self._listed[server] = (by_raw, prefix)
        by_name = overridden_entries(server, by_raw, self._overrides.get(server, {}), prefix, self._definitions,
                                     self._warn)
        self._sources[server] = (NameSource(frozenset(by_name), prefix), by_name)
        return by_name

    def _forget_definitions(self) -> None:
        """Drop the pool's definitions no entry uses once it holds twice as many as there are entries."""
        held = [*self._sources.values(), *((None, tools) for tools, _ in self._listed.values())]
        live = sum(len(tools) for _, tools in held)
        if len(self._definitions) > 2 * live + 64:
            self._definitions = {e._wire: e._wire for _, tools in held for e in tools.values()}

    def _follow(self, assigned: dict[str, dict[str, str]], skip: Collection[str]) -> None:
        for other, (_source, tools) in list(self._sources.items()):
            current = {e.base_name: e.name for e in self._by_server.get(other, {}).values()}
            if other not in skip and assigned[other] != current:
                self._apply(other, tools, assigned[other])

    def _assign(self) -> dict[str, dict[str, str]]:
        assigned, warnings = assign_names({s: source for s, (source, _) in self._sources.items()}, BRIDGE_NAMES)
        for warning in warnings:
            self._warn(warning)
        return assigned

    def _warn(self, warning: str) -> None:
        """Log a warning the first time only: a server lists its tools again and again."""
        if warning not in self._warned:
            self._warned.add(warning)
            logger.warning("%s", warning)

    def _apply(self, server: str, by_name: dict[str, ToolEntry], qualified: dict[str, str]) -> ServerChange:
        """Register the server's tools (`by_name`: by the names they are shown by) under their qualified names."""
        old = self._by_server.get(server, {})
        new: dict[str, ToolEntry] = {}
        refused: list[str] = []
        for shown, name in qualified.items():
            owner = self._tools.get(name)
            if name in BRIDGE_NAMES:
                refused.append(name)
                logger.warning("server %s: tool name %s is reserved; tool %r skipped", server, name, shown)
                continue
            if owner is not None and owner.server != server:
                refused.append(name)
                logger.warning(
                    "server %s: tool name %s is already taken by server %s; tool %r skipped",
                    server, name, owner.server, shown,
                )
                continue
            entry = by_name[shown]
            if entry.name != name:
                entry = entry.renamed(name)
            if old.get(name) == entry:
                entry = old[name]  # unchanged: the registered object stays
            new[name] = by_name[shown] = entry  # one object per tool, registered and in `_sources`
        added = tuple(sorted(n for n in new if n not in old))
        removed = tuple(sorted(n for n in old if n not in new))
        replaced = tuple(sorted(n for n in new if n in old and new[n] != old[n]))
        change = ServerChange(server, added, replaced, removed, tuple(refused))
        if not change.changed:
            return change
        for name in removed:
            del self._tools[name]
        self._tools.update(new)
        if any(entry.app in ("ui", "app") for entry in new.values()):
            self._app_servers.add(server)
        else:
            self._app_servers.discard(server)
        if new:
            self._by_server[server] = new
        else:
            self._by_server.pop(server, None)
        self._after_change(server)
        return change

    def remove_server(self, server: str) -> ServerChange:
        return self.set_server_tools(server, ())

    def bump(self) -> None:
        """Record a change that is not a registration (an upstream became (un)available)."""
        self.generation += 1
        self._changed.set()
        self._changed = anyio.Event()

    def _after_change(self, server: str) -> None:
        self.bump()
        entries = list(self._by_server.get(server, {}).values())
        for listener in self._listeners:
            try:
                listener(server, entries)
            except Exception:
                logger.exception("registry listener %r failed for server %s", listener, server)

    async def wait_for_change(self, since: int) -> int:
        """Return the generation as soon as it differs from `since`."""
        while self.generation == since:
            await self._changed.wait()
        return self.generation
