"""Qualified names (SPEC §4): `<server>__<tool>`, sanitised, shortened, unique, order-independent."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.names import MAX_LENGTH, qualify_names, sanitize

VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def assert_valid(name: str) -> None:
    assert VALID.fullmatch(name), repr(name)


def qualify_name(server: str, raw: str) -> str:
    """The qualified name of one tool, as if it were its server's only tool."""
    return qualify_names(server, [raw])[raw]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("get_time", "get_time"),
        ("get-time", "get-time"),
        ("ABC_xyz-019", "ABC_xyz-019"),
        ("files.read", "files_read"),
        ("fs/read file", "fs_read_file"),
        ("a:b@c#d$e%f", "a_b_c_d_e_f"),
        ("naïve", "na_ve"),
        ("日本", "__"),
        ("emoji😀", "emoji_"),
        ("tab\tnew\nline", "tab_new_line"),
        ("", ""),
        ("٣", "_"),  # an Arabic-Indic digit is \d in Unicode regexes, not in [0-9]
        ("ｆｕｌｌ", "____"),
        ("\x00", "_"),
    ],
)
def test_sanitize(text: str, expected: str) -> None:
    assert sanitize(text) == expected


@given(st.text())
def test_sanitize_keeps_length_and_only_safe_characters(text: str) -> None:
    result = sanitize(text)
    assert len(result) == len(text)
    assert re.fullmatch(r"[A-Za-z0-9_-]*", result)
    for before, after in zip(text, result, strict=True):
        assert after == before or after == "_"


@pytest.mark.parametrize(
    ("server", "raw", "expected"),
    [
        ("time", "get_current_time", "time__get_current_time"),
        ("fs", "read.file", "fs__read_file"),
        ("my-server", "do/it", "my-server__do_it"),
        ("s", "", "s__"),
    ],
)
def test_qualify_name(server: str, raw: str, expected: str) -> None:
    assert qualify_name(server, raw) == expected


def test_exactly_64_characters_is_kept() -> None:
    raw = "t" * (MAX_LENGTH - len("srv__"))
    assert qualify_name("srv", raw) == "srv__" + raw
    assert len(qualify_name("srv", raw)) == 64


def test_long_names_are_shortened_deterministically_with_prefix_and_hash() -> None:
    raw = "describe_" + "very_" * 20 + "long_tool"
    name = qualify_name("server", raw)
    assert len(name) == MAX_LENGTH
    assert_valid(name)
    assert name.startswith("server__describe_very_")
    assert re.fullmatch(r".*_[0-9a-f]{10}", name)
    assert qualify_name("server", raw) == name
    assert qualify_names("server", [raw, "other"])[raw] == name


def test_long_names_with_the_same_prefix_stay_distinct() -> None:
    raws = ["x" * 100 + suffix for suffix in ("a", "b", "c")]
    names = qualify_names("s", raws)
    assert len(set(names.values())) == 3
    for name in names.values():
        assert_valid(name)


def test_hash_depends_on_the_server() -> None:
    raw = "y" * 100
    assert qualify_name("a", raw)[-10:] != qualify_name("b", raw)[-10:]


def test_names_that_sanitise_alike_get_distinct_names() -> None:
    names = qualify_names("s", ["a.b", "a/b", "a b"])
    assert len(set(names.values())) == 3
    for name in names.values():
        assert_valid(name)
        assert name.startswith("s__a_b_")


def test_a_name_that_needs_no_sanitising_keeps_its_plain_form_in_a_clash() -> None:
    names = qualify_names("s", ["a_b", "a.b"])
    assert names["a_b"] == "s__a_b"
    assert names["a.b"] != "s__a_b"
    assert names["a.b"].startswith("s__a_b_")


def test_a_lone_name_with_unsafe_characters_just_gets_sanitised() -> None:
    assert qualify_names("s", ["a.b", "c"]) == {"a.b": "s__a_b", "c": "s__c"}


def test_a_raw_name_spelling_out_another_tools_hashed_name_does_not_collide() -> None:
    long_raw = "z" * 80
    hashed = qualify_name("s", long_raw)
    impostor = hashed.removeprefix("s__")  # sanitises to itself, fits in 64: keeps the plain form
    names = qualify_names("s", [long_raw, impostor])
    assert names[impostor] == hashed
    assert names[long_raw] != hashed
    assert_valid(names[long_raw])
    assert qualify_names("s", [impostor, long_raw]) == names


def test_lone_surrogates_do_not_crash() -> None:
    names = qualify_names("s", ["a\ud800" * 40, "b\udfff"])
    for name in names.values():
        assert_valid(name)


def test_duplicates_in_the_input_collapse() -> None:
    assert qualify_names("s", ["a", "a", "b"]) == {"a": "s__a", "b": "s__b"}


def test_empty_input() -> None:
    assert qualify_names("s", []) == {}


def test_result_is_in_raw_name_order() -> None:
    raws = ["b", "a" * 90, "c.d", "c_d", "a"]
    assert list(qualify_names("s", raws)) == sorted(raws)


def test_long_server_names_still_give_valid_unique_names() -> None:
    server = "S" * 64
    names = qualify_names(server, ["a", "b", "c" * 70])
    assert len(set(names.values())) == 3
    for name in names.values():
        assert_valid(name)


def test_accepts_any_iterable() -> None:
    assert qualify_names("s", (n for n in ["x"])) == {"x": "s__x"}
    assert qualify_names("s", {"x": object()}) == {"x": "s__x"}


# --- properties -------------------------------------------------------------------------------

SERVER_NAMES = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
# Raw names drawn so that clashes after sanitising are common: a tiny alphabet of safe and
# unsafe characters, plus arbitrary unicode and very long names.
CLASHY = st.text(alphabet="ab_.-/ é", min_size=0, max_size=6)
LONG = st.builds(lambda stem, n, tail: stem * n + tail, st.sampled_from(["x", "ab.", "é/"]),
                 st.integers(20, 80), st.text(alphabet="xy.", max_size=3))
RAW_NAMES = st.lists(st.one_of(CLASHY, LONG, st.text(max_size=80)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(server=SERVER_NAMES, raws=RAW_NAMES, seed=st.integers(0, 2**32))
def test_qualify_names_is_unique_valid_and_order_independent(server: str, raws: list[str], seed: int) -> None:
    names = qualify_names(server, raws)
    assert set(names) == set(raws)
    assert len(set(names.values())) == len(names), names
    for name in names.values():
        assert_valid(name)
    shuffled = list(raws)
    random.Random(seed).shuffle(shuffled)
    assert qualify_names(server, shuffled) == names
    assert qualify_names(server, reversed(raws)) == names


@settings(max_examples=200, deadline=None)
@given(server=SERVER_NAMES, raws=RAW_NAMES)
def test_plain_names_are_kept_whenever_they_are_safe(server: str, raws: list[str]) -> None:
    names = qualify_names(server, raws)
    for raw, name in names.items():
        plain = f"{server}__{raw}"
        if VALID.fullmatch(plain):
            assert name == plain


@settings(max_examples=200, deadline=None)
@given(server=SERVER_NAMES, raw=st.text(max_size=100))
def test_qualify_name_is_a_valid_prefix_of_the_sanitised_name(server: str, raw: str) -> None:
    name = qualify_name(server, raw)
    assert_valid(name)
    plain = f"{server}__{sanitize(raw)}"
    if len(plain) <= MAX_LENGTH:
        assert name == plain
    else:
        assert name[:53] == plain[:53]
