"""The live registry (SPEC §4): names, `mcp-<server>` toolsets, refusals, generation."""

from __future__ import annotations

import gc
import logging
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from mcp import types

from proxy.config import ToolOverride
from proxy.names import BRIDGE_NAMES
from proxy.overrides import Preset
from proxy.registry import Registry, ServerChange, ToolEntry, _registry


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def tool(name: str, description: str = "", **schema: Any) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object", **schema})


def tools(*names: str) -> list[types.Tool]:
    return [tool(name) for name in names]


# --- names and entries ------------------------------------------------------------------------


def test_tools_get_qualified_names_that_map_back_to_server_and_raw_name() -> None:
    registry = Registry()
    registry.set_server_tools("fs", [tool("read.file", "Read a file."), tool("write")])
    assert sorted(registry.tools) == ["fs__read_file", "fs__write"]
    entry = registry.get("fs__read_file")
    assert isinstance(entry, ToolEntry)
    assert (entry.name, entry.server, entry.raw_name) == ("fs__read_file", "fs", "read.file")
    assert entry.tool.name == "fs__read_file"
    assert entry.description == "Read a file."
    assert entry.input_schema == {"type": "object"}


def test_names_are_never_parsed_back() -> None:
    registry = Registry()
    registry.set_server_tools("a__b", tools("c"))
    registry.set_server_tools("a", tools("b__d"))
    assert (registry.get("a__b__c").server, registry.get("a__b__c").raw_name) == ("a__b", "c")
    assert (registry.get("a__b__d").server, registry.get("a__b__d").raw_name) == ("a", "b__d")


def test_entry_keeps_the_upstream_definition_apart_from_the_name() -> None:
    upstream = types.Tool(
        name="t", title="T", description="d", input_schema={"type": "object", "required": ["x"]},
        output_schema={"type": "object"}, annotations=types.ToolAnnotations(read_only_hint=True),
    )
    registry = Registry()
    registry.set_server_tools("s", [upstream])
    entry = registry.get("s__t")
    assert entry is not None
    assert entry.tool == upstream.model_copy(update={"name": "s__t"})
    assert upstream.name == "t"  # the caller's object is not modified


def test_the_registry_holds_one_entry_per_tool() -> None:
    """At fleet scale every object per tool counts: the entries kept to re-register a server when
    names move are the registered ones, and an unchanged re-listing keeps them."""
    registry = Registry()
    server = "one_entry_each"  # no other test's leftovers count
    registry.set_server_tools(server, tools("x", "y", "z"))
    registered = dict(registry.tools)
    assert not registry.set_server_tools(server, tools("x", "y", "z")).changed
    gc.collect()
    alive = [obj for obj in gc.get_objects() if isinstance(obj, ToolEntry) and obj.server == server]
    assert sorted(map(id, alive)) == sorted(map(id, registered.values()))


def test_servers_listing_the_same_tools_share_their_texts() -> None:
    """Replicated servers (one per tenant, say) cost their names, not their definitions again."""

    def listed() -> list[types.Tool]:  # fresh objects each time, as two connections would parse them
        return [tool(f"t{i}", "Does " + "a thing. " * i, properties={"x": {"type": "string", "maxLength": i}})
                for i in range(5)]

    registry = Registry()
    registry.set_server_tools("tenant1", listed())
    registry.set_server_tools("tenant2", listed())
    one, two = registry.get("tenant1__t3"), registry.get("tenant2__t3")
    assert one is not None and two is not None
    assert one.description is two.description and one._wire is two._wire
    assert two.input_schema["properties"]["x"] == {"type": "string", "maxLength": 3}


def test_definitions_no_tool_uses_are_let_go() -> None:
    registry = Registry()
    for version in range(200):  # a server whose schemas change at every listing
        registry.set_server_tools("s", [tool("t", properties={"v": {"const": version}})])
    assert len(registry._definitions) <= 2 * len(registry.tools) + 64
    assert registry.get("s__t").input_schema["properties"]["v"] == {"const": 199}


def test_unknown_names_are_none() -> None:
    registry = Registry()
    assert registry.get("nope") is None
    assert registry.server_tools("nope") == {}
    assert registry.servers == []
    assert registry.toolsets() == {}


def test_servers_are_sorted_and_server_tools_are_per_server() -> None:
    registry = Registry()
    registry.set_server_tools("zeta", tools("a"))
    registry.set_server_tools("alpha", tools("a", "b"))
    assert registry.servers == ["alpha", "zeta"]
    assert sorted(registry.server_tools("alpha")) == ["alpha__a", "alpha__b"]
    assert list(registry.server_tools("zeta")) == ["zeta__a"]


def test_read_views_cannot_be_used_to_mutate_the_registry() -> None:
    registry = Registry()
    registry.set_server_tools("s", tools("a"))
    with pytest.raises(TypeError):
        registry.tools["x"] = registry.get("s__a")  # type: ignore[index]
    with pytest.raises(TypeError):
        registry.server_tools("s")["x"] = registry.get("s__a")  # type: ignore[index]


# --- dynamic toolsets -------------------------------------------------------------------------


def test_server_toolset_exists_from_first_registration_until_last_removal() -> None:
    registry = Registry()
    assert "mcp-git" not in registry.toolsets()
    registry.set_server_tools("git", tools("status"))
    assert registry.toolsets() == {"mcp-git": frozenset({"git__status"})}
    registry.set_server_tools("git", tools("status", "log"))
    assert registry.toolsets()["mcp-git"] == {"git__status", "git__log"}
    registry.set_server_tools("git", tools("log"))
    assert registry.toolsets()["mcp-git"] == {"git__log"}
    registry.set_server_tools("git", [])
    assert registry.toolsets() == {}
    assert registry.servers == []


def test_remove_server_drops_its_tools_and_toolset_only() -> None:
    registry = Registry()
    registry.set_server_tools("a", tools("x"))
    registry.set_server_tools("b", tools("y"))
    change = registry.remove_server("a")
    assert change == ServerChange("a", removed=("a__x",))
    assert list(registry.tools) == ["b__y"]
    assert registry.toolsets() == {"mcp-b": frozenset({"b__y"})}
    assert registry.remove_server("a") == ServerChange("a")


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("reserved", sorted(BRIDGE_NAMES))
def test_reserved_bridge_names_are_refused_and_logged(
    reserved: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Qualified names always hold `__`, so only a qualifier bug could produce a bridge name;
    # the registry must refuse it anyway.
    monkeypatch.setattr(_registry, "assign_names",
                        lambda sources, reserved: ({s: {r: r for r in v.raw_names} for s, v in sources.items()}, []))
    registry = Registry()
    with caplog.at_level(logging.WARNING, logger="proxy.registry"):
        change = registry.set_server_tools("evil", tools(reserved, "fine"))
    assert change.refused == (reserved,)
    assert change.added == ("fine",)
    assert registry.get(reserved) is None
    assert reserved in caplog.text
    assert "reserved" in caplog.text


def test_bridge_names_are_the_three_bridge_tools() -> None:
    assert frozenset({"tool_search", "tool_describe", "tool_call"}) == set(BRIDGE_NAMES)


@pytest.mark.parametrize("order", [("a", "a__b"), ("a__b", "a")])
def test_a_name_two_servers_claim_goes_to_neither_whatever_the_order(order: tuple[str, str]) -> None:
    offered = {"a": tools("b__c"), "a__b": tools("c", "d")}  # both spell a__b__c
    registry = Registry()
    for server in order:
        registry.set_server_tools(server, offered[server])
    routes = sorted((e.name, e.server, e.raw_name) for e in registry.tools.values())
    assert routes == [("a__b__c_01b8a75bce", "a", "b__c"), ("a__b__c_a92700ced2", "a__b", "c"),
                      ("a__b__d", "a__b", "d")]
    registry.remove_server("a")
    assert sorted(registry.tools) == ["a__b__c", "a__b__d"]  # no longer claimed twice: plain again


def test_a_tool_spelling_out_another_servers_hashed_name_shadows_nothing() -> None:
    registry = Registry()
    registry.set_server_tools("a", tools("b__c", "b__c_a92700ced2"))
    registry.set_server_tools("a__b", tools("c"))
    assert registry.get("a__b__c_a92700ced2").server == "a"
    assert len(registry.server_tools("a__b")) == 1 and len(registry.tools) == 3


def test_re_registering_the_same_server_replaces_in_place() -> None:
    registry = Registry()
    registry.set_server_tools("s", [tool("a", "old"), tool("b"), tool("c")])
    order = list(registry.tools)
    change = registry.set_server_tools("s", [tool("c"), tool("a", "new"), tool("b")])
    assert change == ServerChange("s", replaced=("s__a",))
    assert registry.get("s__a").description == "new"
    assert list(registry.tools) == order


def test_changes_report_added_replaced_removed() -> None:
    registry = Registry()
    assert registry.set_server_tools("s", tools("a", "b")) == ServerChange("s", added=("s__a", "s__b"))
    change = registry.set_server_tools("s", [tool("b", "changed"), tool("c")])
    assert change == ServerChange("s", added=("s__c",), replaced=("s__b",), removed=("s__a",))
    assert change.changed
    assert sorted(registry.tools) == ["s__b", "s__c"]


# --- generation -------------------------------------------------------------------------------


def test_generation_bumps_exactly_once_per_changed_set_server_tools() -> None:
    registry = Registry()
    assert registry.generation == 0
    registry.set_server_tools("s", tools("a", "b", "c"))
    assert registry.generation == 1
    registry.set_server_tools("s", [tool("a", "x"), tool("b", "y"), tool("d")])  # replace 2, add 1, drop 1
    assert registry.generation == 2
    registry.remove_server("s")
    assert registry.generation == 3


def test_a_no_op_does_not_bump_the_generation() -> None:
    registry = Registry()
    registry.set_server_tools("s", [tool("a", "d"), tool("b")])
    generation = registry.generation
    change = registry.set_server_tools("s", [tool("b"), tool("a", "d")])
    assert not change.changed
    assert change == ServerChange("s")
    assert registry.generation == generation
    assert registry.remove_server("never-registered") == ServerChange("never-registered")
    assert registry.set_server_tools("empty", []) == ServerChange("empty")
    assert registry.generation == generation


def test_bump_moves_the_generation_without_a_registration() -> None:
    registry = Registry()
    registry.bump()
    registry.bump()
    assert registry.generation == 2


@pytest.mark.anyio
async def test_wait_for_change_returns_at_once_when_already_changed() -> None:
    registry = Registry()
    registry.set_server_tools("s", tools("a"))
    with anyio.fail_after(5):
        assert await registry.wait_for_change(0) == 1


@pytest.mark.anyio
async def test_wait_for_change_wakes_on_a_registration() -> None:
    registry = Registry()
    woke: list[int] = []

    async def waiter() -> None:
        woke.append(await registry.wait_for_change(registry.generation))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            assert woke == []
            registry.set_server_tools("s", tools("a"))
    assert woke == [1, 1]


@pytest.mark.anyio
async def test_wait_for_change_keeps_waiting_through_a_no_op_and_wakes_on_bump() -> None:
    registry = Registry()
    registry.set_server_tools("s", tools("a"))
    woke: list[int] = []

    async def waiter() -> None:
        woke.append(await registry.wait_for_change(1))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            registry.set_server_tools("s", tools("a"))  # no-op
            await anyio.wait_all_tasks_blocked()
            assert woke == []
            registry.bump()
    assert woke == [2]


@pytest.mark.anyio
async def test_wait_for_change_in_a_loop_sees_every_later_change() -> None:
    registry = Registry()
    seen: list[int] = []

    async def follower() -> None:
        generation = 0
        while generation < 3:
            generation = await registry.wait_for_change(generation)
            seen.append(generation)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower)
            for server in ("a", "b", "c"):
                await anyio.wait_all_tasks_blocked()
                registry.set_server_tools(server, tools("t"))
    assert seen == [1, 2, 3]


# --- listeners --------------------------------------------------------------------------------


def test_listeners_get_the_servers_entries_after_each_change() -> None:
    registry = Registry()
    calls: list[tuple[str, list[str], int]] = []

    def listener(server: str, entries: Sequence[ToolEntry]) -> None:
        calls.append((server, sorted(e.name for e in entries), registry.generation))

    registry.add_listener(listener)
    registry.set_server_tools("s", tools("a", "b"))
    registry.set_server_tools("s", tools("a", "b"))  # no-op: no call
    registry.set_server_tools("t", tools("x"))
    registry.remove_server("s")
    assert calls == [("s", ["s__a", "s__b"], 1), ("t", ["t__x"], 2), ("s", [], 3)]
    assert registry.get("s__a") is None


def test_every_listener_is_called_in_order() -> None:
    registry = Registry()
    order: list[str] = []
    registry.add_listener(lambda server, entries: order.append("first"))
    registry.add_listener(lambda server, entries: order.append("second"))
    registry.set_server_tools("s", tools("a"))
    assert order == ["first", "second"]


def test_a_failing_listener_is_logged_and_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    registry = Registry()
    seen: list[str] = []

    def broken(server: str, entries: Sequence[ToolEntry]) -> None:
        raise RuntimeError("boom")

    registry.add_listener(broken)
    registry.add_listener(lambda server, entries: seen.append(server))
    with caplog.at_level(logging.ERROR, logger="proxy.registry"):
        change = registry.set_server_tools("s", tools("a"))
    assert change.added == ("s__a",)
    assert seen == ["s"]
    assert registry.generation == 1
    assert "boom" in caplog.text


# --- raw names (`prefix: false`) --------------------------------------------------------------


def test_a_raw_server_keeps_its_tool_names() -> None:
    registry = Registry()
    registry.set_server_tools("fixture", tools("test_simple_text", "echo"), prefix=False)
    assert sorted(registry.tools) == ["echo", "test_simple_text"]
    assert registry.get("echo").raw_name == "echo"


def test_a_raw_name_clash_leaves_the_later_server_qualified_whatever_the_arrival_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = Registry(), Registry()
    with caplog.at_level(logging.WARNING, logger="proxy.registry"):
        first.set_server_tools("alpha", tools("echo"), prefix=False)
        first.set_server_tools("beta", tools("echo", "other"), prefix=False)
        second.set_server_tools("beta", tools("echo", "other"), prefix=False)
        second.set_server_tools("alpha", tools("echo"), prefix=False)
    for registry in (first, second):
        assert {n: (e.server, e.raw_name) for n, e in registry.tools.items()} == {
            "echo": ("alpha", "echo"), "beta__echo": ("beta", "echo"), "other": ("beta", "other")}
    assert "server beta: name 'echo' is taken" in caplog.text
    first.remove_server("alpha")
    assert sorted(first.tools) == ["echo", "other"] and first.get("echo").server == "beta"


@pytest.mark.parametrize("raw", ["tool_call", "alpha__x", "has space"])
def test_a_raw_name_that_is_reserved_another_servers_qualified_name_or_invalid_stays_qualified(raw: str) -> None:
    registry = Registry()
    registry.set_server_tools("alpha", tools("x"))
    registry.set_server_tools("raw", tools(raw), prefix=False)
    assert [n for n, e in registry.tools.items() if e.server == "raw"] == [f"raw__{raw.replace(' ', '_')}"]


# --- many servers at once (a fleet listed from its cached catalogs) ------------------------------


def routes(registry: Registry) -> dict[str, tuple[str, str]]:
    return {name: (entry.server, entry.raw_name) for name, entry in registry.tools.items()}


def test_registering_many_servers_at_once_names_them_as_one_at_a_time() -> None:
    offered = {"a": (tools("b__c"), True), "a__b": (tools("c", "d"), True), "alpha": (tools("echo"), False),
               "beta": (tools("echo", "other"), False), "fs": (tools("read.file"), True)}
    one_by_one, at_once = Registry(), Registry()
    for server, (listed, prefix) in offered.items():
        one_by_one.set_server_tools(server, listed, prefix=prefix)
    seen: list[str] = []
    at_once.add_listener(lambda server, entries: seen.append(server))
    at_once.set_servers_tools(offered)
    assert routes(at_once) == routes(one_by_one)
    assert sorted(seen) == sorted(offered) and at_once.generation == len(offered)


def test_a_batch_hands_a_raw_name_from_a_registered_server_to_the_one_before_it() -> None:
    registry = Registry()
    registry.set_server_tools("beta", tools("echo"), prefix=False)
    assert routes(registry) == {"echo": ("beta", "echo")}
    registry.set_servers_tools({"alpha": (tools("echo"), False), "beta": (tools("echo"), False)})
    assert routes(registry) == {"echo": ("alpha", "echo"), "beta__echo": ("beta", "echo")}


# --- overrides (issue 34) ----------------------------------------------------------------------

POST_SCHEMA = {"properties": {"workspace": {"type": "string"}, "text": {"type": "string"}},
               "required": ["workspace", "text"]}
POST_OVERRIDE = {"acme_post": ToolOverride(name="post", description="Post a note.\u200b", hide=("workspace",),
                                           defaults={"workspace": "W1"})}


def chat_tools() -> list[types.Tool]:
    return [tool("acme_post", "You MUST use this tool.", **POST_SCHEMA), tool("ping", "Ping.")]


@pytest.mark.parametrize("overrides_first", [True, False])
def test_an_override_shows_the_tool_renamed_redescribed_and_preset_and_routes_to_the_raw_name(
    overrides_first: bool,
) -> None:
    registry = Registry()
    if overrides_first:
        registry.set_overrides("chat", POST_OVERRIDE)
    registry.set_server_tools("chat", chat_tools())
    if not overrides_first:
        generation = registry.generation
        assert registry.set_overrides("chat", POST_OVERRIDE).changed
        assert registry.generation == generation + 1
    assert sorted(registry.tools) == ["chat__ping", "chat__post"]
    post = registry.get("chat__post")
    assert post is not None
    assert (post.server, post.raw_name, post.base_name) == ("chat", "acme_post", "post")
    assert post.description == "Post a note.\ufffd"  # cleaned as an upstream's text is
    assert post.tool.name == "chat__post" and post.tool.description == post.description
    assert post.input_schema == {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    assert post.preset == Preset(["workspace"], {"workspace": "W1"})
    assert registry.get("chat__ping").preset is None  # type: ignore[union-attr]
    assert set(registry.listed_tools("chat")) == {"acme_post", "ping"}
    assert registry.listed_tools("chat")["acme_post"].description == "You MUST use this tool."


def test_the_same_overrides_again_change_nothing_and_none_give_back_the_upstreams_tools() -> None:
    registry = Registry()
    registry.set_server_tools("chat", chat_tools())
    plain = dict(registry.tools)
    registry.set_overrides("chat", POST_OVERRIDE)
    generation = registry.generation
    assert not registry.set_overrides("chat", dict(POST_OVERRIDE)).changed and registry.generation == generation
    registry.set_server_tools("chat", chat_tools())  # relisted: still overridden
    assert registry.generation == generation and "chat__post" in registry.tools
    change = registry.set_overrides("chat", {})
    assert (change.added, change.removed) == (("chat__acme_post",), ("chat__post",))
    assert dict(registry.tools) == plain


def test_an_override_applies_to_a_server_that_lists_later_and_outlives_its_tools() -> None:
    registry = Registry()
    registry.set_overrides("chat", POST_OVERRIDE)
    assert not registry.tools
    registry.set_server_tools("chat", chat_tools())
    registry.remove_server("chat")
    assert not registry.tools and not registry.listed_tools("chat")
    registry.set_server_tools("chat", chat_tools())
    assert "chat__post" in registry.tools


def test_a_rename_that_clashes_is_not_applied_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    registry = Registry()
    registry.set_overrides("chat", {"acme_post": ToolOverride(name="ping", description="Post.")})
    with caplog.at_level(logging.WARNING, logger="proxy.registry"):
        registry.set_server_tools("chat", chat_tools())
        registry.set_server_tools("chat", [*chat_tools(), tool("more")])
    assert sorted(registry.tools) == ["chat__acme_post", "chat__more", "chat__ping"]
    assert registry.get("chat__acme_post").description == "Post."  # type: ignore[union-attr]  # the rest applies
    assert [r.getMessage() for r in caplog.records] == [
        "server chat: overrides.acme_post.name: 'ping' collides with tool ping of server chat: both would be listed "
        "as chat__ping (`toolbridge check` shows the line)"]


def test_what_an_override_cannot_do_is_logged_once_as_check_words_it(caplog: pytest.LogCaptureFixture) -> None:
    registry = Registry()
    registry.set_overrides("chat", {"acme_post": ToolOverride(hide=("text",)), "pong": ToolOverride(name="x")})
    with caplog.at_level(logging.WARNING, logger="proxy.registry"):
        registry.set_server_tools("chat", chat_tools())
        registry.set_server_tools("chat", chat_tools())
    assert [r.getMessage() for r in caplog.records] == [
        "server chat: overrides.acme_post.hide.0: 'text' is required by tool acme_post of server chat and has no "
        "default (`toolbridge check` shows the line)",
        "server chat: overrides.pong: names no tool of server chat (2 tools); did you mean 'ping'? "
        "(`toolbridge check` shows the line)",
    ]
    assert "text" not in registry.get("chat__acme_post").input_schema["properties"]  # type: ignore[union-attr]


def test_a_renamed_tool_of_an_unprefixed_server_keeps_its_new_bare_name() -> None:
    registry = Registry()
    registry.set_overrides("chat", {"acme_post": ToolOverride(name="post")})
    registry.set_server_tools("chat", chat_tools(), prefix=False)
    assert sorted(registry.tools) == ["ping", "post"]
    assert registry.get("post").raw_name == "acme_post"  # type: ignore[union-attr]


def test_a_rename_only_shares_the_upstreams_definition() -> None:
    registry = Registry()
    registry.set_overrides("chat", {"ping": ToolOverride(name="pong")})
    registry.set_server_tools("chat", chat_tools())
    assert registry.get("chat__pong")._wire is registry.listed_tools("chat")["ping"]._wire  # type: ignore[union-attr]
