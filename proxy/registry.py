"""The live registry of upstream tools, grouped in `mcp-<server>` toolsets.

Synchronous by design: it lives on one event loop, so it needs no locks. Every change bumps
`generation` and wakes whoever waits in `wait_for_change`, which is how sessions learn that the
`tools/list` they were given may be stale.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import zlib
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
from mcp import types
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from mcp_types.methods import SERVER_RESULTS, serialize_server_result
from pydantic import ValidationError

from proxy.config import ToolOverride
from proxy.names import BRIDGE_NAMES, NameSource, assign_names, server_toolset
from proxy.overrides import Preset, overridden_schema, override_findings, preset_of, shown_names
from proxy.protocol import AppRole, app_role, for_handshake_era, rewrite_ui_meta
from proxy.text import clean, clean_strings

logger = logging.getLogger(__name__)

# What a tool needs to be passed on: listed once, and in a shape every era accepts as it is sent there (a
# handshake-era client gets no output schema its era cannot take: `for_handshake_era`). A `Tool` can
# parse yet fail the stricter wire shape (`"properties": []`); registered, one such tool made every
# downstream `tools/list` fail. A name listed twice made routing depend on list order. One version
# per distinct result model is checked: the handshake-era versions share one.
_LIST_VERSIONS = sorted({model: version for (method, version), model in sorted(SERVER_RESULTS.items())
                         if method == "tools/list"}.values())
_CHECKED_AT_ONCE = 50  # tools per check: a whole 500-tool list's dump and models take ~5 MB at a time
SLICE_SECONDS = 0.02  # per-tool work between two yields to the loop, in `set_server_tools_sliced`
T = TypeVar("T")
Steps = Generator[None, None, T]  # work done a step at a time; its result is the generator's return value


def _wire_valid(tools: list[types.Tool]) -> bool:
    """Whether every era's `tools/list` result accepts these tools as that era is sent them (`for_handshake_era`;
    the result's other fields aside)."""
    for version in _LIST_VERSIONS:
        shaped = tools if version in MODERN_PROTOCOL_VERSIONS else for_handshake_era(tools)
        data = {"tools": [tool.model_dump(by_alias=True, exclude_none=True) for tool in shaped]}
        try:
            serialize_server_result("tools/list", version, data)
        except ValidationError as exc:
            if any(error["loc"][:1] == ("tools",) for error in exc.errors()):
                return False
    return True


def _servable_tools(server: str, tools: Iterable[types.Tool]) -> Steps[dict[str, types.Tool]]:
    """The tools by raw name: a name listed twice keeps one chosen by content, never by list order,
    and a tool no client could be sent is dropped."""
    by_raw: dict[str, list[types.Tool]] = {}
    for tool in tools:
        by_raw.setdefault(tool.name, []).append(tool)
    kept: dict[str, types.Tool] = {}
    for name, same in by_raw.items():
        if len(same) > 1:
            logger.warning("server %s: tool %.80r is listed %d times; one is kept", server, name, len(same))
        kept[name] = min(same, key=lambda tool: tool.model_dump_json()) if len(same) > 1 else same[0]
    listed = list(kept.values())
    valid = True
    for at in range(0, len(listed), _CHECKED_AT_ONCE):
        valid = valid and _wire_valid(listed[at:at + _CHECKED_AT_ONCE])
        yield
    if valid:
        return kept
    for name, tool in list(kept.items()):
        if not _wire_valid([tool]):
            logger.warning("server %s: tool %.80r skipped: its definition is not valid MCP", server, name)
            del kept[name]
        yield
    return kept


def _entries(server: str, tools: Iterable[types.Tool], definitions: dict[bytes, bytes]) -> Steps[dict[str, ToolEntry]]:
    """The servable tools as registry entries, a step per tool."""
    by_raw: dict[str, ToolEntry] = {}
    for raw, tool in (yield from _servable_tools(server, tools)).items():
        by_raw[raw] = ToolEntry.shown(server, raw, tool, definitions)
        yield
    return by_raw


def run_steps(steps: Steps[T]) -> T:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


async def run_sliced(steps: Steps[T]) -> T:
    """`steps` run to the end, yielding to the loop every `SLICE_SECONDS` of them."""
    since = time.perf_counter()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        if time.perf_counter() - since > SLICE_SECONDS:
            await anyio.lowlevel.checkpoint()
            since = time.perf_counter()


def _as_shown(server: str, tool: types.Tool, name: str) -> types.Tool:
    """The tool renamed, its texts cleaned (SPEC §8) and its UI reference namespaced: what every listing,
    search and describe shows."""
    update: dict[str, Any] = {"name": name, "input_schema": clean_strings(tool.input_schema),
                              "meta": rewrite_ui_meta(tool.meta, server)}
    if tool.description is not None:
        update["description"] = clean(tool.description)
    if tool.title is not None:
        update["title"] = clean(tool.title)
    if tool.output_schema is not None:
        update["output_schema"] = clean_strings(tool.output_schema)
    return tool.model_copy(update=update)


class ToolEntry:
    """One registered upstream tool. `tool` is the upstream definition, renamed to `name`, as its override
    (if any) shows it.

    `raw_name` is the upstream's own name (what a call is routed by), `base_name` the name the tool is
    shown by before qualification (the override's, when it renames the tool), and `preset` what an
    override does to each call's arguments (`overrides.Preset`).

    Held compactly, for fleets of tens of thousands of tools: the definition minus its description
    as compressed JSON (a parsed schema costs ~9 KB of Python objects per tool), rebuilt on demand
    for the few tools a call or a `tool_describe` touches; the description stays a string, since
    every listing and search result reads it, and so does its MCP Apps role (`app`).
    """

    __slots__ = ("_description", "_wire", "app", "base_name", "name", "preset", "raw_name", "server")

    def __init__(self, name: str, server: str, raw_name: str, description: str | None, wire: bytes,
                 app: AppRole | None = None, base_name: str | None = None, preset: Preset | None = None) -> None:
        self.name, self.server, self.raw_name = name, server, raw_name
        self.base_name = raw_name if base_name is None else base_name
        self._description, self._wire, self.app, self.preset = description, wire, app, preset

    @classmethod
    def shown(cls, server: str, raw_name: str, tool: types.Tool, definitions: dict[bytes, bytes]) -> ToolEntry:
        """`tool` as listings, search and describe show it (`_as_shown`), named by its raw name.

        Equal texts are one object: descriptions through `sys.intern`, definitions through the
        `definitions` pool (a replicated server's tools cost their names and little more).
        """
        tool = _as_shown(server, tool, raw_name)
        rest = tool.model_dump(by_alias=True, exclude_none=True, mode="json", exclude={"name", "description"})
        description = None if tool.description is None else sys.intern(tool.description)
        return cls(raw_name, server, raw_name, description, _pooled(rest, definitions), app_role(tool.meta))

    def renamed(self, name: str) -> ToolEntry:
        """The same tool under another name; the definition is shared, not copied."""
        return ToolEntry(name, self.server, self.raw_name, self._description, self._wire, self.app, self.base_name,
                         self.preset)

    def overridden(self, base_name: str, override: ToolOverride, definitions: dict[bytes, bytes]) -> ToolEntry:
        """This upstream tool as `override` shows it, shown by `base_name`; its description cleaned as an
        upstream's is (SPEC §8), and its definition shared unless parameters are hidden or defaulted."""
        description = self._description if override.description is None else sys.intern(clean(override.description))
        wire = self._wire
        if override.hide or override.defaults:
            fields = self._fields()
            fields["inputSchema"] = overridden_schema(fields.get("inputSchema", {}), override)
            wire = _pooled(fields, definitions)
        return ToolEntry(base_name, self.server, self.raw_name, description, wire, self.app, base_name,
                         preset_of(override))

    def _fields(self) -> dict[str, Any]:
        return json.loads(zlib.decompress(self._wire))

    @property
    def tool(self) -> types.Tool:
        fields = self._fields()
        if self._description is not None:
            fields["description"] = self._description
        return types.Tool.model_validate({**fields, "name": self.name})

    @property
    def description(self) -> str:
        return self._description or ""

    @property
    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = self._fields().get("inputSchema", {})
        return schema

    def _key(self) -> tuple[str, str, str, str, str | None, bytes, Preset | None]:
        return self.name, self.server, self.raw_name, self.base_name, self._description, self._wire, self.preset

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolEntry) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"ToolEntry({self.name!r}, server={self.server!r})"


def _pooled(fields: dict[str, Any], definitions: dict[bytes, bytes]) -> bytes:
    """A definition's compressed JSON, one object for equal definitions."""
    wire = zlib.compress(json.dumps(fields, separators=(",", ":")).encode(), 6)
    return definitions.setdefault(wire, wire)


def _overridden(
    server: str, by_raw: dict[str, ToolEntry], overrides: Mapping[str, ToolOverride], prefix: bool,
    definitions: dict[bytes, bytes], warn: Callable[[str], None],
) -> dict[str, ToolEntry]:
    """The server's tools by the names they are shown by, each as its override shows it; what does not apply
    as written is warned of, as `check` words it. Without overrides, `by_raw` itself: its entries are then the
    registered ones (one object a tool)."""
    if not overrides:
        return by_raw
    schemas = {raw: entry.input_schema if raw in overrides else {} for raw, entry in by_raw.items()}
    for where, reason in override_findings(server, prefix, overrides, schemas):
        warn(f"server {server}: {'.'.join(map(str, where))}: {reason} (`toolbridge check` shows the line)")
    shown, _ = shown_names(by_raw, overrides)
    return {shown[raw]: entry if (override := overrides.get(raw)) is None else
            entry.overridden(shown[raw], override, definitions) for raw, entry in by_raw.items()}


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
        return self._register(server, run_steps(_entries(server, tools, self._definitions)), prefix)

    async def set_server_tools_sliced(
        self, server: str, tools: Iterable[types.Tool], *, prefix: bool = True
    ) -> ServerChange:
        """`set_server_tools`, its per-tool work (checks, cleaning, compression) done first, yielding to the
        loop every `SLICE_SECONDS`: thousands of tools must not stop every other upstream's calls for seconds. The
        registry itself changes at the end, in one step."""
        return self._register(server, await run_sliced(_entries(server, tools, self._definitions)), prefix)

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
        kept = {server: self._set_source(server, run_steps(_entries(server, tools, self._definitions)), prefix)
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
        by_name = _overridden(server, by_raw, self._overrides.get(server, {}), prefix, self._definitions, self._warn)
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
