"""A server's tools as registry entries: which of those it listed can be served, each as every listing shows
it and as its override shows it, with equal definitions held once.
"""

from __future__ import annotations

import json
import logging
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mcp import types
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from mcp_types.methods import SERVER_RESULTS, serialize_server_result
from pydantic import ValidationError

from proxy.config import ToolOverride
from proxy.overrides import Preset, overridden_schema, override_findings, preset_of, shown_names
from proxy.protocol import AppRole, app_role, for_handshake_era, rewrite_ui_meta
from proxy.registry._steps import Steps
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


def servable_entries(
    server: str, tools: Iterable[types.Tool], definitions: dict[bytes, bytes]
) -> Steps[dict[str, ToolEntry]]:
    """The servable tools as registry entries, a step per tool."""
    by_raw: dict[str, ToolEntry] = {}
    for raw, tool in (yield from _servable_tools(server, tools)).items():
        by_raw[raw] = ToolEntry.shown(server, raw, tool, definitions)
        yield
    return by_raw


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


def overridden_entries(
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
