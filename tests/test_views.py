"""Session views: scope, core/deferred split, availability, caching, profile matching."""

from __future__ import annotations

import anyio
import pytest
from inprocess import tool

from proxy.config import ProfileConfig, ToolsetsConfig
from proxy.downstream import bridge
from proxy.registry import Registry
from proxy.views import RECENT_RANKINGS, SUGGEST_MAX_CHARS, SUGGEST_POOL, Spellings, Views

CONFIG = ToolsetsConfig(
    core=("a__*",),
    profiles={
        "default": ProfileConfig(),
        "cursor": ProfileConfig(match="Cursor*", disabled=("b",), context_tokens=40000),
        "zed": ProfileConfig(match="*", toolsets=("a",)),
    },
)


def catalog(down: frozenset[str] = frozenset()) -> tuple[Views, Registry]:
    registry = Registry()
    registry.set_server_tools("a", [tool("one"), tool("two")])
    registry.set_server_tools("b", [tool("three")])
    registry.set_server_tools("c", [tool("four")])
    return Views(registry, CONFIG, lambda server: server not in down), registry


def test_views_split_core_and_deferred_and_honour_disabled_toolsets() -> None:
    view = catalog()[0].for_profile("cursor")
    assert view.core == {"a__one", "a__two"}
    assert view.deferred == {"c__four"}
    assert view.context_tokens == 40000
    assert [t.name for t in view.surface.tools] == ["a__one", "a__two", "tool_search", "tool_describe", "tool_call"]


def test_unavailable_servers_leave_the_view_but_stay_callable() -> None:
    view = catalog(down=frozenset({"c"}))[0].for_profile("default")
    assert view.deferred == {"b__three"}
    assert "c__four" in view.allowed


def test_only_core_tools_in_scope_means_pass_through() -> None:
    view = catalog()[0].for_profile("zed")
    assert view.surface.tier == "pass-through"
    assert [t.name for t in view.surface.tools] == ["a__one", "a__two"]


def test_views_are_cached_until_the_registry_changes() -> None:
    cat, registry = catalog()
    first = cat.for_profile("default")
    assert cat.for_profile("default") is first
    registry.set_server_tools("c", [tool("four"), tool("five")])
    second = cat.for_profile("default")
    assert second is not first and "c__five" in second.deferred
    assert second.fingerprint != first.fingerprint


def test_equal_catalogs_give_equal_fingerprints_whatever_the_registration_order() -> None:
    forward, backward = Registry(), Registry()
    for name in ("x", "y", "z"):
        forward.set_server_tools(name, [tool(f"{name}{i}") for i in range(3)])
    for name in ("z", "y", "x"):
        backward.set_server_tools(name, [tool(f"{name}{i}") for i in reversed(range(3))])
    assert (Views(forward, CONFIG, lambda s: True).for_profile("default").fingerprint
            == Views(backward, CONFIG, lambda s: True).for_profile("default").fingerprint)


def test_profiles_match_client_names_case_insensitively_in_name_order() -> None:
    cat = catalog()[0]
    assert cat.profile_for_client("cursor-vscode") == "cursor"
    assert cat.profile_for_client("zed") == "zed"
    assert cat.profile_for_client(None) == "default"


def test_a_search_over_no_tools_finds_nothing() -> None:
    assert Views(Registry(), CONFIG, lambda server: True).index.search("anything", limit=5, scope=frozenset()) == []


@pytest.mark.anyio
async def test_search_sees_every_registered_tool_whether_the_idle_indexer_got_to_it_or_not() -> None:
    cat, registry = catalog()
    scope = frozenset({"a__one", "b__three", "c__four", "c__five", "d__six"})
    async with anyio.create_task_group() as tg:
        await tg.start(cat.index_when_idle)
        registry.set_server_tools("c", [tool("four"), tool("five", "Five apples.")])
        with anyio.fail_after(5):
            while cat._unindexed:  # the idle indexer gets to every server, with no search asking for it
                await anyio.sleep(0.01)
        assert cat.index.search("apples", limit=5, scope=scope) == ["c__five"]
        registry.set_server_tools("d", [tool("six", "Six pears.")])  # no chance to index it yet
        assert list(cat._unindexed) == ["d"]
        assert cat.index.search("pears", limit=5, scope=scope) == ["d__six"]
        registry.remove_server("c")
        assert cat.index.search("apples", limit=5, scope=scope) == []
        tg.cancel_scope.cancel()


def test_a_repeated_search_reuses_the_views_ranking(monkeypatch: pytest.MonkeyPatch) -> None:
    cat, registry = catalog()
    registry.set_server_tools("c", [tool("four", "Four apples.")])
    ranked: list[str] = []
    original = bridge._rank
    monkeypatch.setattr(bridge, "_rank", lambda views, view, query, limit: ranked.append(query) or original(
        views, view, query, limit))
    view = cat.for_profile("default")
    for query in ("apples", "apples", "three", "apples"):
        assert bridge.search(cat, view, {"queries": [query]})["results"][0]["matches"] == (
            ["c__four"] if query == "apples" else ["b__three"])
    assert ranked == ["apples", "three"]
    bridge.search(cat, view, {"queries": ["apples"], "limit": 1})  # another limit is another ranking
    assert ranked == ["apples", "three", "apples"]


def test_a_view_keeps_its_most_recently_used_rankings_up_to_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    cat, _ = catalog()
    ranked: list[str] = []
    original = bridge._rank
    monkeypatch.setattr(bridge, "_rank", lambda views, view, query, limit: ranked.append(query) or original(
        views, view, query, limit))
    view = cat.for_profile("default")
    queries = [f"query {i}" for i in range(RECENT_RANKINGS + 1)]
    for query in queries[:-1]:
        bridge.search(cat, view, {"queries": [query]})
    bridge.search(cat, view, {"queries": [queries[0]]})  # the oldest, used again: now the most recent
    bridge.search(cat, view, {"queries": [queries[-1]]})  # one past the bound: the least recently used goes
    ranked.clear()
    for query in (queries[0], queries[-1], queries[2], queries[1]):
        bridge.search(cat, view, {"queries": [query]})
    assert ranked == [queries[1]]


def test_a_kept_ranking_goes_when_the_index_changes_under_the_same_view() -> None:
    cat, registry = catalog()
    view = cat.for_profile("default")  # a request may still hold the view it started with
    assert bridge.search(cat, view, {"queries": ["apples"]})["results"][0]["matches"] == []
    registry.set_server_tools("c", [tool("four", "Four apples.")])
    assert bridge.search(cat, view, {"queries": ["apples"]})["results"][0]["matches"] == ["c__four"]


def test_did_you_mean_finds_the_tool_part_a_typo_or_a_server_typo() -> None:
    names = ["git__git_status", "git__git_log", "svn__log", "github__create_issue", "github__list_issues"]
    spellings = Spellings(names)
    assert spellings.suggest("log", 5) == ["svn__log"]  # `*__log`
    assert spellings.suggest("git__git_stauts", 5) == ["git__git_status"]
    assert spellings.suggest("gihtub__create_issue", 5) == ["github__create_issue"]  # the server misspelled
    assert spellings.suggest("create_isue", 5) == ["github__create_issue"]  # a bare tool part
    assert spellings.suggest("zzz__nothing", 5) == spellings.suggest("q" * (SUGGEST_MAX_CHARS + 1), 5) == []


def test_did_you_mean_compares_a_bounded_pool_of_names() -> None:
    typo = "big__zebra_crosing"
    assert Spellings(["big__zebra_crossing"]).suggest(typo, 5) == ["big__zebra_crossing"]
    crowded = Spellings([f"big__filler_{i:05d}" for i in range(SUGGEST_POOL)] + ["big__zebra_crossing"])
    assert crowded.suggest(typo, 5) == []  # past the pool (in name order): not compared


def test_describe_suggests_for_its_first_unknown_names_only() -> None:
    cat, _ = catalog()
    view = cat.for_profile("default")
    assert "c__four" in bridge.describe(cat, view, {"names": ["c__fuor"]})["hint"]
    unknown = [f"x{i}" for i in range(bridge.SUGGESTED_NAMES)] + ["c__fuor"]
    assert "Did you mean" not in bridge.describe(cat, view, {"names": unknown})["hint"]


def test_a_views_servers_are_every_server_in_scope_and_up_tool_only_ones_too() -> None:
    cat, _ = catalog(down=frozenset({"c"}))
    assert cat.for_profile("default").servers == ("a", "b")  # none has resources or prompts
    assert cat.for_profile("cursor").servers == ("a",)  # `b` is disabled there


def test_did_you_mean_splits_a_name_where_its_server_part_ends() -> None:
    spellings = Spellings(["srv__foo__bar"])  # a tool whose own name has the separator
    assert spellings.suggest("foo__bar", 5) == ["srv__foo__bar"]
    assert spellings.suggest("srv__foo__baz", 5) == ["srv__foo__bar"]
