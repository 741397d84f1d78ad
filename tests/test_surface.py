"""A session's `tools/list` (SPEC §6.2, §6.5): tiers, bridge tools, determinism and caching."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
import pytest
from mcp import types

from bench.search_eval import catalogs_dir
from proxy.config import ToolSearchSettings
from proxy.listing import HEADING, estimate_tokens, listing_tokens, render_listing
from proxy.names import BRIDGE_NAMES
from proxy.registry import ToolEntry
from proxy.surface import (
    ALWAYS_LOAD,
    MAX_DESCRIBE,
    MAX_QUERIES,
    MAX_RESULT_CHARS,
    ClientHints,
    Surface,
    build_surface,
)

REAL_FLEET = catalogs_dir() / "real-fleet.json"
DEFAULTS = ToolSearchSettings()


def tool(name: str, description: str = "", **properties: Any) -> types.Tool:
    return types.Tool(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": properties, "required": sorted(properties)},
    )


CORE = [tool("time__get_current_time", "Get the current time.", timezone={"type": "string"})]
DEFERRED = {
    "git": [tool("git__git_status", "Shows the working tree status.", repo_path={"type": "string"})],
    "fetch": [
        tool("fetch__fetch", "Fetches a URL from the internet. Returns markdown.", url={"type": "string"}),
        tool("fetch__head", "Fetch only the headers of a URL."),
    ],
}


def wire(surface: Surface) -> bytes:
    """The `tools/list` answer as a client receives it."""
    return json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in surface.tools]).encode()


def by_name(surface: Surface) -> dict[str, types.Tool]:
    return {t.name: t for t in surface.tools}


def settings(**overrides: Any) -> ToolSearchSettings:
    return DEFAULTS.model_copy(update=overrides)


@pytest.mark.parametrize(
    ("context", "overrides", "budget", "form"),
    [
        (200_000, {}, 4000, "full"),
        (40_000, {}, 2000, "full"),
        (None, {}, 4000, "full"),
        (200_000, {"threshold_pct": 0}, 0, "none"),
        (200_000, {"listing": "off"}, 0, "none"),
        (None, {"listing": "off"}, 0, "none"),
    ],
)
def test_budget_and_listing(context: int | None, overrides: dict[str, Any], budget: int, form: str) -> None:
    surface = build_surface(CORE, DEFERRED, settings(**overrides), context)
    assert (surface.tier, surface.budget, surface.form) == ("bridge", budget, form)
    search = by_name(surface)["tool_search"].description or ""
    assert (HEADING in search) == (form != "none")
    listing = search[search.index(HEADING) :] if form != "none" else ""
    assert surface.listing_tokens == listing_tokens(listing)


@pytest.mark.parametrize(
    ("deferred", "overrides"),
    [({}, {}), ({"git": []}, {}), (DEFERRED, {"enabled": "off"})],
)
def test_pass_through_offers_every_tool_in_scope_with_full_schemas(
    deferred: Mapping[str, Sequence[types.Tool]], overrides: dict[str, Any]
) -> None:
    surface = build_surface(CORE, deferred, settings(**overrides), 200_000, PLAIN)
    everything = [*CORE, *(t for tools in deferred.values() for t in tools)]
    assert surface.tier == "pass-through"
    assert surface.form == "none"
    assert list(surface.tools) == sorted(everything, key=lambda t: t.name)
    assert not set(BRIDGE_NAMES) & set(by_name(surface))


def test_bridge_tier_is_core_tools_then_the_bridge_tools() -> None:
    core = [tool("zeta__z"), *CORE, tool("alpha__a")]
    surface = build_surface(core, DEFERRED, DEFAULTS, None, PLAIN)
    assert [t.name for t in surface.tools] == [
        "alpha__a",
        "time__get_current_time",
        "zeta__z",
        *BRIDGE_NAMES,
    ]
    assert surface.tools[1] is CORE[0]
    assert surface.deferred_count == 3


def test_listing_closes_the_search_description() -> None:
    surface = build_surface(CORE, DEFERRED, DEFAULTS, None)
    catalog = {label: [(t.name, t.description or "") for t in tools] for label, tools in DEFERRED.items()}
    listing = render_listing(catalog, 4000)
    assert listing.text is not None
    assert (by_name(surface)["tool_search"].description or "").endswith("\n\n" + listing.text)


SEARCH_GOLDEN = """\
Search 3 deferred tools (schemas not loaded) by keyword; returns names, short descriptions and required \
parameters. Every name in the catalog below exists: never claim one is unavailable. With an exact name, \
skip search and use `tool_describe`. Use one query per capability: service name + action + object (e.g. \
"github create issue"), at most 7 queries.

Deferred tool catalog (call schemas via `tool_describe`, invoke via `tool_call`):
fetch tools (2):
- fetch__fetch: Fetches a URL from the internet.
- fetch__head: Fetch only the headers of a URL.
git tools (1):
- git__git_status: Shows the working tree status."""


def test_search_description_golden() -> None:
    surface = build_surface(CORE, DEFERRED, DEFAULTS, 200_000)
    assert by_name(surface)["tool_search"].description == SEARCH_GOLDEN


def test_enabled_auto_behaves_as_on() -> None:
    auto = build_surface(CORE, DEFERRED, settings(enabled="auto"), 40_000)
    assert wire(auto) == wire(build_surface(CORE, DEFERRED, settings(enabled="on"), 40_000))


BULKY = {"bulk": [tool(f"bulk__operation_{i:02}") for i in range(30)], "git": DEFERRED["git"]}


@pytest.mark.parametrize(
    ("deferred", "context", "present", "absent"),
    [
        (
            DEFERRED,
            200_000,
            ["Search 3 deferred tools", "never claim one is unavailable", "at most 7"],
            ['"names not listed"'],
        ),
        (BULKY, 2_000, ['"names not listed" still have tools', "never claim one is unavailable"], []),
        (
            DEFERRED,
            0,
            ["Search 3 deferred tools", "`tool_describe`", "at most 7"],
            ["catalog below", '"names not listed"', HEADING],
        ),
        ({"git": DEFERRED["git"]}, None, ["Search 1 deferred tool "], []),
    ],
)
def test_search_framing_says_only_what_applies(
    deferred: Mapping[str, Sequence[types.Tool]], context: int, present: list[str], absent: list[str]
) -> None:
    description = by_name(build_surface(CORE, deferred, DEFAULTS, context))["tool_search"].description or ""
    for phrase in present:
        assert phrase in description
    for phrase in absent:
        assert phrase not in description


def test_collapsed_servers_are_reported() -> None:
    surface = build_surface(CORE, BULKY, DEFAULTS, 2_000)
    assert (surface.form, surface.collapsed) == ("mixed", ("bulk",))


def _validator(surface: Surface, name: str) -> jsonschema.Draft202012Validator:
    schema = by_name(surface)[name].input_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize(
    ("name", "arguments", "valid"),
    [
        ("tool_search", {"queries": ["github create issue"]}, True),
        ("tool_search", {"queries": ["a"] * MAX_QUERIES, "limit": 12}, True),
        ("tool_search", {"queries": ["a"] * (MAX_QUERIES + 1)}, False),
        ("tool_search", {"queries": ["a"], "limit": 13}, False),
        ("tool_search", {"queries": ["a"], "limit": 0}, False),
        ("tool_search", {"limit": 3}, False),
        ("tool_describe", {"names": ["git__git_status"] * MAX_DESCRIBE}, True),
        ("tool_describe", {"names": ["git__git_status"] * (MAX_DESCRIBE + 1)}, False),
        ("tool_describe", {}, False),
        ("tool_call", {"name": "git__git_status", "arguments": {"repo_path": "."}}, True),
        ("tool_call", {"name": "git__git_status", "arguments": {}}, True),
        ("tool_call", {"name": "git__git_status"}, False),
        ("tool_call", {"name": "git__git_status", "arguments": "{}"}, False),
    ],
)
def test_bridge_schemas(name: str, arguments: dict[str, Any], valid: bool) -> None:
    surface = build_surface(CORE, DEFERRED, settings(max_search_limit=12, search_default_limit=4), None)
    assert _validator(surface, name).is_valid(arguments) is valid


def test_search_limit_mentions_its_default() -> None:
    surface = build_surface(CORE, DEFERRED, settings(max_search_limit=12, search_default_limit=4), None)
    limit = by_name(surface)["tool_search"].input_schema["properties"]["limit"]
    assert limit["maximum"] == 12
    assert "default 4" in limit["description"]


def _shuffled(
    core: Sequence[types.Tool], deferred: Mapping[str, Sequence[types.Tool]], rng: random.Random
) -> tuple[list[types.Tool], dict[str, list[types.Tool]]]:
    labels = list(deferred)
    rng.shuffle(labels)
    return rng.sample(list(core), len(core)), {
        label: rng.sample(list(deferred[label]), len(deferred[label])) for label in labels
    }


def _real_fleet(limit: int) -> dict[str, list[types.Tool]]:
    if not REAL_FLEET.exists():
        pytest.skip(f"{REAL_FLEET} is not available")
    servers = json.loads(REAL_FLEET.read_text(encoding="utf-8"))["servers"]
    fleet: dict[str, list[types.Tool]] = {}
    count = 0
    for label, server in sorted(servers.items()):
        for raw in server["tools"][: limit - count]:
            qualified = {**raw, "name": f"{label}__{raw['name']}"}
            fleet.setdefault(label, []).append(types.Tool.model_validate(qualified))
        count = sum(len(tools) for tools in fleet.values())
    return fleet


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("context", [None, 1_000_000, 40_000, 8_000, 1_000])
def test_shuffled_input_gives_identical_bytes(seed: int, context: int | None) -> None:
    fleet = _real_fleet(500)
    core = [fleet["git"][0], fleet["fetch"][0]]
    deferred = {label: [t for t in tools if t not in core] for label, tools in fleet.items()}
    expected = wire(build_surface(core, deferred, DEFAULTS, context))
    shuffled_core, shuffled_deferred = _shuffled(core, deferred, random.Random(seed))
    assert wire(build_surface(shuffled_core, shuffled_deferred, DEFAULTS, context)) == expected


def test_500_real_tools_at_1m_context_keep_tool_search_under_4500_tokens() -> None:
    deferred = _real_fleet(500)
    surface = build_surface([], deferred, DEFAULTS, 1_000_000)
    assert surface.deferred_count == 500
    search = by_name(surface)["tool_search"]
    definition = json.dumps(
        search.model_dump(by_alias=True, exclude_none=True, include={"name", "description", "input_schema"})
    )
    assert surface.listing_tokens <= surface.budget == 4000
    assert estimate_tokens(definition) < 4500


# --- clients that defer tools themselves (issue 11) ------------------------------------------

PLAIN = ClientHints(always_load=False)


def test_core_and_bridge_tools_are_marked_always_loaded_and_tool_call_declares_the_result_limit() -> None:
    upstream_meta = tool("alpha__a").model_copy(update={"meta": {"vendor/x": 1}})
    surface = build_surface([upstream_meta, *CORE], DEFERRED, DEFAULTS, None, ClientHints(result_chars=250_000))
    meta = {t.name: t.meta for t in surface.tools}
    assert meta["alpha__a"] == {"vendor/x": 1, ALWAYS_LOAD: True, MAX_RESULT_CHARS: 250_000}
    assert meta["time__get_current_time"] == {ALWAYS_LOAD: True, MAX_RESULT_CHARS: 250_000}
    assert meta["tool_call"] == {ALWAYS_LOAD: True, MAX_RESULT_CHARS: 250_000}
    assert meta["tool_search"] == meta["tool_describe"] == {ALWAYS_LOAD: True}


def test_always_load_can_be_turned_off_per_profile() -> None:
    assert all(t.meta is None for t in build_surface(CORE, DEFERRED, DEFAULTS, None, PLAIN).tools)


def test_pass_through_marks_core_tools_only() -> None:
    surface = build_surface(CORE, {"git": [tool("git__log")]}, settings(enabled="off"), None)
    assert {t.name: bool(t.meta) for t in surface.tools} == {"git__log": False, "time__get_current_time": True}


def test_direct_exposure_lists_every_tool_in_scope_with_its_own_meta_and_no_bridge_tools() -> None:
    deferred = {**DEFERRED, "git": [tool("git__git_status").model_copy(update={"meta": {"anthropic/x": True}})]}
    surface = build_surface(CORE, deferred, DEFAULTS, 200_000, ClientHints(exposure="direct"))
    everything = [*CORE, *(t for tools in deferred.values() for t in tools)]
    assert surface.tier == "direct" and list(surface.tools) == sorted(everything, key=lambda t: t.name)
    assert by_name(surface)["git__git_status"].meta == {"anthropic/x": True}
    assert by_name(surface)["time__get_current_time"].meta is None


def test_reserved_tokens_shrink_the_listing_budget() -> None:
    full = build_surface(CORE, BULKY, DEFAULTS, 200_000)
    squeezed = build_surface(CORE, BULKY, DEFAULTS, 200_000, reserved_tokens=full.budget - 100)
    assert squeezed.budget == full.budget and squeezed.listing_tokens <= 100 < full.listing_tokens


class _Unparsable(ToolEntry):
    """A registry entry whose whole definition must not be needed."""

    __slots__ = ()

    @property
    def tool(self) -> types.Tool:
        raise AssertionError(f"{self.name}: the whole definition was parsed")


def test_the_bridge_tier_reads_only_names_and_descriptions_of_deferred_tools() -> None:
    """Parsing every entry would cost ~400 MB for a moment at 50,000 tools, and seconds of CPU."""
    deferred = {"git": [_Unparsable("git__git_status", "git", "git_status", "Shows the working tree status.", b"")]}
    surface = build_surface(CORE, deferred, DEFAULTS, 200_000)
    assert surface.tier == "bridge"
    assert "- git__git_status: Shows the working tree status." in by_name(surface)["tool_search"].description
    with pytest.raises(AssertionError, match="parsed"):
        build_surface(CORE, deferred, DEFAULTS, 200_000, ClientHints(exposure="direct"))
