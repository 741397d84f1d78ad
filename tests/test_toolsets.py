"""Toolset resolution (SPEC §5): includes, `all`, aliases, subtraction, globs, core split."""

from __future__ import annotations

import pytest

from proxy.config import ProfileConfig, ToolsetConfig
from proxy.toolsets import Toolsets, match_names, session_scope, split_core

DYNAMIC = {
    "mcp-git": frozenset({"git__status", "git__log", "git__diff"}),
    "mcp-time": frozenset({"time__now", "time__convert"}),
    "mcp-fetch": frozenset({"fetch__fetch"}),
}
EVERY_TOOL = frozenset().union(*DYNAMIC.values())


def catalog(named: dict[str, ToolsetConfig] | None = None, dynamic=DYNAMIC) -> Toolsets:
    return Toolsets(named=named or {}, dynamic=dynamic)


def ts(tools: tuple[str, ...] = (), includes: tuple[str, ...] = ()) -> ToolsetConfig:
    return ToolsetConfig(tools=tools, includes=includes)


def scope(cat: Toolsets, toolsets: tuple[str, ...], disabled: tuple[str, ...] = ()) -> frozenset[str]:
    return session_scope(ProfileConfig(toolsets=toolsets, disabled=disabled), cat)


# --- match_names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        ([], set()),
        (["git__log"], {"git__log"}),
        (["git__nope"], set()),
        (["git__*"], {"git__status", "git__log", "git__diff"}),
        (["*__fetch"], {"fetch__fetch"}),
        (["time__?o?"], {"time__now"}),
        (["git__[ld]*"], {"git__log", "git__diff"}),
        (["git__[!ld]*"], {"git__status"}),
        (["*"], set(EVERY_TOOL)),
        (["git__log", "time__*", "git__log"], {"git__log", "time__now", "time__convert"}),
        (["GIT__*"], set()),  # case-sensitive on every platform
        (["git__["], set()),  # an unclosed bracket is a literal, not an error
    ],
)
def test_match_names(patterns: list[str], expected: set[str]) -> None:
    assert match_names(patterns, EVERY_TOOL) == expected


def test_match_names_takes_brackets_literally_when_exact() -> None:
    assert match_names(["a[1]"], {"a[1]", "a1"}) == {"a1"}  # `[1]` is a glob class
    assert match_names(["a"], ["a", "b"]) == {"a"}


# --- resolution -------------------------------------------------------------------------------


def test_a_named_toolset_resolves_its_tools() -> None:
    cat = catalog({"research": ts(tools=("fetch__fetch", "git__log"))})
    assert cat.resolve(["research"]) == {"fetch__fetch", "git__log"}


def test_toolset_tools_may_be_globs() -> None:
    cat = catalog({"clock": ts(tools=("time__*",)), "readers": ts(tools=("*__fetch", "git__[ls]*"))})
    assert cat.resolve(["clock"]) == DYNAMIC["mcp-time"]
    assert cat.resolve(["readers"]) == {"fetch__fetch", "git__log", "git__status"}


def test_toolset_tools_not_registered_are_ignored() -> None:
    cat = catalog({"t": ts(tools=("gone__tool", "git__log"))})
    assert cat.resolve(["t"]) == {"git__log"}


def test_dynamic_toolsets_resolve_directly() -> None:
    assert catalog().resolve(["mcp-git"]) == DYNAMIC["mcp-git"]


def test_bare_server_name_is_an_alias_of_its_dynamic_toolset() -> None:
    cat = catalog()
    assert cat.resolve(["git"]) == DYNAMIC["mcp-git"]
    assert cat.resolve(["git", "mcp-git"]) == DYNAMIC["mcp-git"]


def test_a_named_toolset_shadows_a_server_alias_of_the_same_name() -> None:
    cat = catalog({"git": ts(tools=("git__log",))})
    assert cat.resolve(["git"]) == {"git__log"}
    assert cat.resolve(["mcp-git"]) == DYNAMIC["mcp-git"]


def test_includes_are_recursive() -> None:
    cat = catalog({
        "top": ts(tools=("fetch__fetch",), includes=("middle",)),
        "middle": ts(includes=("bottom", "time")),
        "bottom": ts(tools=("git__log",)),
    })
    assert cat.resolve(["top"]) == {"fetch__fetch", "git__log", "time__now", "time__convert"}


@pytest.mark.parametrize(
    "named",
    [
        {"a": ts(tools=("git__log", "time__now"), includes=("a",))},
        {"a": ts(tools=("git__log",), includes=("b",)), "b": ts(tools=("time__now",), includes=("a",))},
        {
            "a": ts(tools=("git__log",), includes=("b",)),
            "b": ts(includes=("c",)),
            "c": ts(tools=("time__now",), includes=("a", "b", "c")),
        },
    ],
    ids=["self", "pair", "triangle"],
)
def test_include_cycles_resolve_without_error(named: dict[str, ToolsetConfig]) -> None:
    cat = catalog(named)
    for name in named:
        assert cat.resolve([name]) == {"git__log", "time__now"}


def test_diamond_includes_resolve_once() -> None:
    cat = catalog({
        "top": ts(includes=("left", "right")),
        "left": ts(tools=("git__log",), includes=("base",)),
        "right": ts(tools=("time__now",), includes=("base",)),
        "base": ts(tools=("fetch__fetch",), includes=("mcp-git",)),
    })
    assert cat.resolve(["top"]) == {"git__log", "time__now", "fetch__fetch", *DYNAMIC["mcp-git"]}


def test_a_deep_include_chain_does_not_recurse_the_stack() -> None:
    depth = 5000
    named = {f"t{i}": ts(includes=(f"t{i + 1}",)) for i in range(depth)}
    named[f"t{depth}"] = ts(tools=("git__log",))
    assert catalog(named).resolve(["t0"]) == {"git__log"}


def test_a_wide_diamond_lattice_stays_fast() -> None:
    # Without a shared visited set this would walk 2**30 paths.
    layers = 30
    named = {f"a{i}": ts(includes=(f"a{i + 1}", f"b{i + 1}")) for i in range(layers)}
    named.update({f"b{i}": ts(includes=(f"a{i + 1}", f"b{i + 1}")) for i in range(layers)})
    named[f"a{layers}"] = ts(tools=("git__log",))
    named[f"b{layers}"] = ts(tools=("time__now",))
    assert catalog(named).resolve(["a0"]) == {"git__log", "time__now"}


def test_result_has_no_duplicates_and_is_a_frozenset() -> None:
    cat = catalog({"x": ts(tools=("git__log", "git__*"), includes=("git", "mcp-git"))})
    result = cat.resolve(["x", "x", "git"])
    assert isinstance(result, frozenset)
    assert result == DYNAMIC["mcp-git"]


@pytest.mark.parametrize("everything", ["all", "*"])
def test_all_means_every_toolset_including_dynamic_ones(everything: str) -> None:
    cat = catalog({"research": ts(tools=("git__log",))})
    assert cat.resolve([everything]) == EVERY_TOOL


@pytest.mark.parametrize("everything", ["all", "*"])
def test_all_picks_up_new_servers_without_config_edits(everything: str) -> None:
    before = catalog()
    after = catalog(dynamic={**DYNAMIC, "mcp-new": frozenset({"new__tool"})})
    assert before.resolve([everything]) == EVERY_TOOL
    assert after.resolve([everything]) == EVERY_TOOL | {"new__tool"}


def test_all_inside_includes() -> None:
    cat = catalog({"everything": ts(includes=("all",)), "loop": ts(includes=("everything",))})
    assert cat.resolve(["loop"]) == EVERY_TOOL


def test_unknown_toolset_names_are_ignored() -> None:
    cat = catalog({"t": ts(tools=("git__log",), includes=("no-such-toolset", "mcp-gone"))})
    assert cat.resolve(["nope", "mcp-nope", "t"]) == {"git__log"}
    assert cat.resolve(["nope"]) == frozenset()
    assert cat.resolve([]) == frozenset()


def test_nothing_registered() -> None:
    cat = catalog({"t": ts(tools=("git__*",))}, dynamic={})
    assert cat.all_tools == frozenset()
    assert cat.resolve(["all", "t", "git"]) == frozenset()


def test_all_tools_is_the_union_of_dynamic_toolsets() -> None:
    assert catalog().all_tools == EVERY_TOOL


# --- session scope ----------------------------------------------------------------------------


def test_scope_is_enabled_minus_disabled() -> None:
    cat = catalog({"research": ts(tools=("fetch__fetch",), includes=("git",))})
    assert scope(cat, ("all",), ("git",)) == DYNAMIC["mcp-time"] | DYNAMIC["mcp-fetch"]
    assert scope(cat, ("research", "time"), ("mcp-time",)) == {"fetch__fetch", *DYNAMIC["mcp-git"]}


def test_subtraction_always_wins() -> None:
    cat = catalog({
        "research": ts(tools=("fetch__fetch", "git__log")),
        "just_log": ts(tools=("git__log",)),
    })
    # a tool enabled through several toolsets is still removed by one disabled toolset
    assert scope(cat, ("research", "git", "all"), ("just_log",)) == EVERY_TOOL - {"git__log"}
    # disabling everything leaves nothing, whatever is enabled
    assert scope(cat, ("all", "research"), ("all",)) == frozenset()
    assert scope(cat, ("git",), ("*",)) == frozenset()
    # the same toolset enabled and disabled is disabled
    assert scope(cat, ("research",), ("research",)) == frozenset()


def test_disabled_follows_includes_and_aliases() -> None:
    cat = catalog({"vcs": ts(includes=("git",))})
    assert scope(cat, ("all",), ("vcs",)) == EVERY_TOOL - DYNAMIC["mcp-git"]


def test_disabling_an_unknown_toolset_removes_nothing() -> None:
    assert scope(catalog(), ("all",), ("nope",)) == EVERY_TOOL


def test_default_profile_sees_everything() -> None:
    assert session_scope(ProfileConfig(), catalog()) == EVERY_TOOL


# --- core -------------------------------------------------------------------------------------


def test_split_core_exact_and_glob() -> None:
    core, deferred = split_core(EVERY_TOOL, ["time__now", "git__*"])
    assert core == {"time__now", *DYNAMIC["mcp-git"]}
    assert deferred == {"time__convert", "fetch__fetch"}


def test_split_core_only_takes_tools_in_scope() -> None:
    in_scope = frozenset({"time__now", "fetch__fetch"})
    core, deferred = split_core(in_scope, ["git__log", "time__*"])
    assert core == {"time__now"}
    assert deferred == {"fetch__fetch"}


def test_split_core_partitions_the_scope() -> None:
    for patterns in ([], ["*"], ["nope"], ["*__fetch", "git__log"]):
        core, deferred = split_core(EVERY_TOOL, patterns)
        assert core | deferred == EVERY_TOOL
        assert core & deferred == frozenset()
        assert isinstance(core, frozenset) and isinstance(deferred, frozenset)


def test_split_core_of_nothing() -> None:
    assert split_core(frozenset(), ["*"]) == (frozenset(), frozenset())
