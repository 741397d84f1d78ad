"""What `tools/list` returns for one session: its tier, core tools and bridge tools (SPEC §6.2, §6.5).

Pure data to data. The server layer passes in the session's core and deferred tools and gets back
the exact tool definitions to send; the same inputs in any order give byte-identical answers, so a
session is told `list_changed` only when something real changed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp import types

from proxy.config import ToolSearchSettings
from proxy.listing import NO_LISTING, Form, Listing, listing_budget, render_listing
from proxy.protocol import for_handshake_era
from proxy.registry import ToolEntry

__all__ = [
    "ALWAYS_LOAD",
    "MAX_DESCRIBE",
    "MAX_QUERIES",
    "MAX_RESULT_CHARS",
    "ClientHints",
    "Surface",
    "Tier",
    "build_surface",
]

MAX_QUERIES = 7
MAX_DESCRIBE = 10

Tier = Literal["pass-through", "bridge", "direct"]

ALWAYS_LOAD = "anthropic/alwaysLoad"
MAX_RESULT_CHARS = "anthropic/maxResultSizeChars"
_READ_ONLY = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)


@dataclass(frozen=True)
class ClientHints:
    """How this session's client treats tools: whether it defers them, and the results it accepts.

    `exposure="direct"` lists every tool in scope with its schema, leaving the deferring to a client
    that does it itself; `always_load` marks the tools toolbridge wants seen at once (core and
    bridge tools) so such a client does not defer them; `result_chars` tells it how large a result
    toolbridge lets through, so results are cut in one place.
    """

    exposure: Literal["bridge", "direct"] = "bridge"
    always_load: bool = True
    result_chars: int = 100_000


@dataclass(frozen=True)
class Surface:
    """One session's `tools/list`, with the figures `toolbridge catalog` reports.

    `budget` is the listing budget that applied: 0 when no listing was wanted (pass-through tier
    or `listing: off`). `collapsed` names the servers shown as summary lines.
    """

    tools: tuple[types.Tool, ...]
    tier: Tier
    form: Form
    budget: int
    listing_tokens: int
    deferred_count: int
    collapsed: tuple[str, ...] = ()

    @functools.cached_property
    def handshake_era_tools(self) -> tuple[types.Tool, ...]:
        """`tools` as a handshake-era `tools/list` carries them (`for_handshake_era`), shaped once per surface."""
        return tuple(for_handshake_era(self.tools))


def build_surface(
    core: Sequence[types.Tool],
    deferred: Mapping[str, Sequence[types.Tool | ToolEntry]],
    settings: ToolSearchSettings,
    context_tokens: int | None,
    hints: ClientHints = ClientHints(),
    *,
    reserved_tokens: int = 0,
    deferrable: bool | None = None,
) -> Surface:
    """Build a session's tool surface from its core tools and its deferred tools per server label.

    Tool names must be unique across `core` and `deferred` (the registry guarantees it); sorting
    by name is what makes the answer independent of input order. `reserved_tokens` of the listing
    budget are already spent (on tools promoted for this session). `deferrable` says whether the
    session's known catalog has deferred tools, servers that are down included (default: whether
    `deferred` is non-empty): the tier follows it, so it does not flip while servers restart.
    """
    count = sum(len(tools) for tools in deferred.values())
    if hints.exposure == "direct":
        return Surface(_by_name([*core, *_definitions(deferred)]), "direct", "none", 0, 0, count)
    if deferrable is None:
        deferrable = count > 0
    marked = [_always_loaded(tool, hints, result=True) for tool in core]
    if not deferrable or settings.enabled == "off":
        return Surface(_by_name([*marked, *_definitions(deferred)]), "pass-through", "none", 0, 0, count)
    budget = 0 if settings.listing == "off" else listing_budget(context_tokens, settings)
    listing = _listing(deferred, max(0, budget - reserved_tokens))
    bridge = tuple(_always_loaded(tool, hints, result=tool.name == "tool_call")
                   for tool in _bridge_tools(count, listing, settings))
    return Surface(
        tools=(*_by_name(marked), *bridge),
        tier="bridge",
        form=listing.form,
        budget=budget,
        listing_tokens=listing.tokens,
        deferred_count=count,
        collapsed=listing.collapsed,
    )


def _always_loaded(tool: types.Tool, hints: ClientHints, *, result: bool) -> types.Tool:
    """`tool` with toolbridge's hints for clients that defer tools; the upstream's own `_meta` is kept."""
    if not hints.always_load:
        return tool
    meta = {**(tool.meta or {}), ALWAYS_LOAD: True}
    if result:
        meta[MAX_RESULT_CHARS] = hints.result_chars
    return tool.model_copy(update={"meta": meta})


def _definitions(deferred: Mapping[str, Sequence[types.Tool | ToolEntry]]) -> list[types.Tool]:
    """Registry entries are parsed only here, when the whole definitions are sent: never in the bridge
    tier, where parsing 50,000 of them would cost ~400 MB for a moment and seconds of CPU."""
    return [tool if isinstance(tool, types.Tool) else tool.tool for tools in deferred.values() for tool in tools]


def _by_name(tools: Iterable[types.Tool]) -> tuple[types.Tool, ...]:
    return tuple(sorted(tools, key=lambda tool: tool.name))


def _listing(deferred: Mapping[str, Sequence[types.Tool | ToolEntry]], budget: int) -> Listing:
    if budget <= 0:
        return NO_LISTING
    catalog = {
        label: [(tool.name, tool.description or "") for tool in tools] for label, tools in deferred.items()
    }
    return render_listing(catalog, budget)


def _bridge_tools(count: int, listing: Listing, settings: ToolSearchSettings) -> tuple[types.Tool, ...]:
    return (
        types.Tool(
            name="tool_search",
            description=_search_description(count, listing),
            input_schema=_search_schema(settings),
            annotations=_READ_ONLY,
        ),
        types.Tool(
            name="tool_describe",
            description=(
                f"Get the full input schemas of deferred tools by exact name, up to {MAX_DESCRIBE} per "
                "call, before calling them with `tool_call`. Names from the catalog or from search "
                "results need no search first."
            ),
            input_schema=_object(
                ("names",),
                names=_string_list(MAX_DESCRIBE, 'Exact deferred tool names, e.g. ["git__git_status"].'),
                pin={"type": "boolean", "description": "true: list these tools directly from now on, "
                     "where the profile allows it; false: stop."},
            ),
            annotations=_READ_ONLY,
        ),
        types.Tool(
            name="tool_call",
            description=(
                "Invoke a deferred tool by exact name, with arguments matching the inputSchema from "
                "`tool_describe`. Tools offered directly (not deferred) are called directly, not here."
            ),
            input_schema=_object(
                name={"type": "string", "description": "Exact deferred tool name."},
                arguments={"type": "object", "description": "The tool's arguments; {} when it takes none."},
            ),
        ),
    )


def _search_description(count: int, listing: Listing) -> str:
    """The `tool_search` framing; it is sent on every turn, so each sentence earns its place."""
    noun = "tool" if count == 1 else "tools"
    parts = [
        f"Search {count} deferred {noun} (schemas not loaded) by keyword; returns names, "
        "short descriptions and required parameters."
    ]
    if listing.text is not None:
        parts.append("Every name in the catalog below exists: never claim one is unavailable.")
    if count == 0:  # the fleet is still starting (`Views.settled`), or every deferring server is restarting
        parts.append("No deferred tool is available right now (servers starting or restarting); the tool list is "
                     "announced as changed when they arrive.")
    parts.append("With an exact name, skip search and use `tool_describe`.")
    if listing.collapsed:
        parts.append('Servers marked "names not listed" still have tools: search them.')
    parts.append(
        f'Use one query per capability: service name + action + object (e.g. "github create '
        f'issue"), at most {MAX_QUERIES} queries.'
    )
    framing = " ".join(parts)
    return framing if listing.text is None else f"{framing}\n\n{listing.text}"


def _search_schema(settings: ToolSearchSettings) -> dict[str, Any]:
    """`queries` is advertised as an array only, though the bridge also accepts a bare string.

    A property-level `anyOf` is where client schema support is weakest (Gemini function
    declarations and OpenAI strict mode reject or flatten it), and one clear shape steers the
    model to batch its queries; leniency belongs to the server, not the advertised contract.
    """
    return _object(
        queries=_string_list(
            MAX_QUERIES, 'Keyword queries, one per capability, e.g. ["slack send message"].'
        ),
        limit={
            "type": "integer",
            "minimum": 1,
            "maximum": settings.max_search_limit,
            "description": f"Matches per query (default {settings.search_default_limit}).",
        },
        required=("queries",),
    )


def _string_list(max_items: int, description: str) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
        "maxItems": max_items,
        "description": description,
    }


def _object(required: Sequence[str] | None = None, **properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema; every property is required unless `required` says otherwise."""
    names = list(properties) if required is None else list(required)
    return {"type": "object", "properties": properties, "required": names}
