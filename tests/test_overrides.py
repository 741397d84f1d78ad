"""Tool overrides, the pure part (proxy/overrides.py): the names tools are shown by, the schema clients see,
what a call's arguments get, and what `check` reports."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from proxy.config import ToolOverride
from proxy.errors import InvalidArguments
from proxy.overrides import (
    Clash,
    Preset,
    listed_as,
    overridden_schema,
    override_findings,
    preset_of,
    shown_names,
)


def renames(**names: str) -> dict[str, ToolOverride]:
    return {raw: ToolOverride(name=name) for raw, name in names.items()}


# --- shown_names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raws", "overrides", "shown", "dropped"),
    [
        (["a", "b"], {}, {"a": "a", "b": "b"}, []),
        (["a", "b"], renames(a="x"), {"a": "x", "b": "b"}, []),
        (["a", "b"], renames(a="a"), {"a": "a", "b": "b"}, []),  # to its own name: no rename, no clash
        (["a", "b"], {"a": ToolOverride(description="d")}, {"a": "a", "b": "b"}, []),
        (["a", "b"], renames(a="b", b="a"), {"a": "b", "b": "a"}, []),  # a swap clashes with nothing
        (["a", "b"], renames(a="b"), {"a": "a", "b": "b"}, ["a"]),  # b keeps its own name
        (["a", "b"], renames(a="x", b="x"), {"a": "a", "b": "b"}, ["a", "b"]),  # neither wins
        (["list_rooms", "ping"], renames(ping="list.rooms"), {"list_rooms": "list_rooms", "ping": "ping"}, ["ping"]),
        (["a", "b", "c"], renames(a="b", c="a"), {"a": "a", "b": "b", "c": "c"}, ["a", "c"]),  # a back, then c
        (["a"], renames(missing="a"), {"a": "a"}, []),  # an override of a tool not listed does nothing
    ],
)
def test_shown_names(
    raws: list[str], overrides: dict[str, ToolOverride], shown: dict[str, str], dropped: list[str]
) -> None:
    for order in itertools.permutations(raws):  # the order tools are listed in never matters
        names, clashes = shown_names(order, overrides)
        assert names == shown
        assert sorted(clash.raw for clash in clashes) == dropped


def test_a_clash_names_the_other_tool_as_it_is_shown() -> None:
    _, clashes = shown_names(["a", "b", "c"], renames(a="x", b="x", c="a"))
    assert clashes == [Clash("a", "x", "b", "x"), Clash("b", "x", "a", "x"), Clash("c", "a", "a", "a")]


def test_shown_names_stay_distinct_once_qualified() -> None:
    raws = ["a", "a.b", "b", "c", "d"]
    for chosen in itertools.product([None, "a", "a_b", "b", "a.b", "z"], repeat=3):
        overrides = {raw: ToolOverride(name=name) for raw, name in zip(["a", "b", "c"], chosen, strict=True)}
        names, _ = shown_names(raws, overrides)
        renamed = [raw for raw in raws if names[raw] != raw]
        keys = [names[raw].replace(".", "_") for raw in renamed]
        others = {names[raw].replace(".", "_") for raw in raws if raw not in renamed}
        assert len(set(keys)) == len(keys) and not others & set(keys), (overrides, names)


# --- the schema clients see ------------------------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"workspace": {"type": "string"}, "text": {"type": "string"}, "urgency": {"type": "string"}},
    "required": ["workspace", "text", "urgency"],
    "additionalProperties": False,
}


def test_a_hidden_parameter_is_gone_and_a_defaulted_one_is_shown_with_its_default_and_optional() -> None:
    shown = overridden_schema(SCHEMA, ToolOverride(hide=("workspace",), defaults={"workspace": "W1", "urgency": "low"}))
    assert shown == {
        "type": "object",
        "properties": {"text": {"type": "string"}, "urgency": {"type": "string", "default": "low"}},
        "required": ["text"],
        "additionalProperties": False,
    }
    assert "workspace" in SCHEMA["properties"] and SCHEMA["required"] == ["workspace", "text", "urgency"]


@pytest.mark.parametrize(
    "schema",
    [{"type": "object"}, {"properties": "junk", "required": "junk"}, {"properties": {"x": True}, "required": ["x"]}],
)
def test_a_schema_of_another_shape_is_changed_only_where_it_can_be(schema: dict[str, Any]) -> None:
    shown = overridden_schema(schema, ToolOverride(hide=("y",), defaults={"x": 1}))
    assert shown == {**schema, **({"required": []} if isinstance(schema.get("required"), list) else {})}


def test_a_default_value_is_copied_not_shared() -> None:
    override = ToolOverride(defaults={"text": {"nested": [1]}})
    shown = overridden_schema(SCHEMA, override)
    shown["properties"]["text"]["default"]["nested"].append(2)
    assert override.defaults == {"text": {"nested": [1]}}


# --- what a call's arguments get ------------------------------------------------------------------


def test_a_hidden_parameter_given_is_refused_with_the_schema_the_caller_sees() -> None:
    preset = Preset(["workspace", "tenant"], {"workspace": "W1", "tenant": "T"})
    with pytest.raises(InvalidArguments) as refused:
        preset.refuse_hidden({"text": "hi", "workspace": "W2"}, {"type": "object"})
    assert str(refused.value) == (
        "workspace is set by toolbridge's configuration and cannot be given: call the tool without it"
    )
    assert (refused.value.path, refused.value.constraint, refused.value.input_schema) == (
        "arguments.workspace",
        "hidden",
        {"type": "object"},
    )
    with pytest.raises(InvalidArguments, match=r"^tenant, workspace are set"):
        preset.refuse_hidden({"workspace": "W1", "tenant": "T"}, {})  # even its own value: never in silence
    preset.refuse_hidden({"text": "hi"}, {})


def test_hidden_values_are_always_filled_and_other_defaults_only_when_left_out() -> None:
    preset = Preset(["workspace"], {"workspace": "W1", "urgency": "low", "tags": ["a"]})
    assert preset.fill({"text": "hi"}) == {"workspace": "W1", "urgency": "low", "tags": ["a"], "text": "hi"}
    assert preset.fill({"urgency": "high", "tags": []}) == {"workspace": "W1", "urgency": "high", "tags": []}
    filled = preset.fill({})
    filled["tags"].append("b")
    assert preset.defaults["tags"] == ["a"]


def test_a_preset_is_compared_by_value_and_exists_only_where_an_override_touches_calls() -> None:
    assert Preset(["a", "b"], {"x": [1, 2]}) == Preset(["b", "a"], {"x": [1, 2]})
    assert hash(Preset(["a"], {"x": 1})) == hash(Preset(["a"], {"x": 1}))
    assert Preset(["a"], {"x": 1}) != Preset(["a"], {"x": 2}) and Preset([], {}) != Preset(["a"], {})
    assert preset_of(ToolOverride(name="n", description="d")) is None
    assert preset_of(ToolOverride(hide=("a",))) == Preset(["a"], {})
    assert preset_of(ToolOverride(defaults={"a": 1})) == Preset([], {"a": 1})


# --- what check reports ---------------------------------------------------------------------------

TOOLS = {"acme_post": SCHEMA, "list_rooms": {"type": "object", "properties": {}}, "ping": {"type": "object"}}


def test_without_the_servers_tools_only_renames_that_clash_with_each_other_are_reported() -> None:
    overrides = {
        "ping": ToolOverride(name="hello"),
        "list_rooms": ToolOverride(name="hello"),
        "nothing": ToolOverride(hide=("x",)),
    }
    assert override_findings("chat", True, overrides, None) == [
        (
            ("overrides", "ping", "name"),
            "'hello' collides with tool list_rooms of server chat (renamed 'hello'): "
            "both would be listed as chat__hello",
        ),
        (
            ("overrides", "list_rooms", "name"),
            "'hello' collides with tool ping of server chat (renamed 'hello'): both would be listed as chat__hello",
        ),
    ]


def test_with_the_servers_tools_every_override_that_cannot_apply_is_reported_in_file_order() -> None:
    overrides = {
        "ping": ToolOverride(name="list.rooms"),
        "acme_post": ToolOverride(hide=("workspace", "text", "nope"), defaults={"workspace": "W1", "other": 1}),
        "list_room": ToolOverride(description="typo"),
        "zzz": ToolOverride(description="unlike anything"),
        "list_rooms": ToolOverride(hide=("anything",)),
    }
    assert override_findings("chat", True, overrides, TOOLS) == [
        (
            ("overrides", "ping", "name"),
            "'list.rooms' collides with tool list_rooms of server chat: both would be listed as chat__list_rooms",
        ),
        (
            ("overrides", "acme_post", "hide", 1),
            "'text' is required by tool acme_post of server chat and has no default",
        ),
        (("overrides", "acme_post", "hide", 2), "tool acme_post of server chat has no parameter 'nope'"),
        (("overrides", "acme_post", "defaults", "other"), "tool acme_post of server chat has no parameter 'other'"),
        (("overrides", "list_room"), "names no tool of server chat (3 tools); did you mean 'list_rooms'?"),
        (("overrides", "zzz"), "names no tool of server chat (3 tools)"),
        (("overrides", "list_rooms", "hide", 0), "tool list_rooms of server chat has no parameter 'anything'"),
    ]


def test_an_override_of_a_tool_the_server_lacks_clashes_with_nothing() -> None:
    overrides = {"gone": ToolOverride(name="ping"), "list_rooms": ToolOverride(name="gone")}
    assert override_findings("chat", True, overrides, TOOLS) == [
        (("overrides", "gone"), "names no tool of server chat (3 tools)")
    ]


def test_overrides_that_apply_are_not_reported() -> None:
    overrides = {
        "acme_post": ToolOverride(name="post", hide=("workspace",), defaults={"workspace": "W1"}),
        "ping": ToolOverride(name="list_rooms_2", hide=("any",), defaults={"any": 1}),  # no properties: any
        "list_rooms": ToolOverride(name="ping"),
    }
    assert override_findings("chat", True, overrides, TOOLS) == []


def test_a_clash_is_told_by_the_name_a_tool_would_be_listed_as() -> None:
    assert listed_as("my.server", "a.b", True) == "my_server__a_b"
    assert listed_as("s", "a.b", False) == "a_b"
    found = override_findings("s", False, {"ping": ToolOverride(name="list.rooms")}, TOOLS)
    assert found[0][1].endswith("both would be listed as list_rooms")
