"""The catalog listing (SPEC §6.3, §6.4): budgets, short descriptions, forms and determinism."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.config import ToolSearchSettings
from proxy.listing import (
    ELLIPSIS,
    HEADING,
    DeferredByServer,
    Listing,
    estimate_tokens,
    listing_budget,
    listing_tokens,
    render_listing,
    short_description,
)


def test_heading_is_exact() -> None:
    assert HEADING == "Deferred tool catalog (call schemas via `tool_describe`, invoke via `tool_call`):"


@pytest.mark.parametrize(
    ("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 4001, 1001)]
)
def test_estimate_tokens_rounds_up(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("Fetch the page and return it as markdown.", 11),  # prose: the spec's estimate
        ("mcp-github__create_pull_request", 11),  # a name: 11 pieces in 31 characters (8 by the estimate)
        ("a__b, c__d, e__f", 14),  # every underscore and comma is a token of its own
        ("internationalization 2026", 7),  # 4 + 2 pieces (6 letters or 3 digits each): the estimate's 7 wins
    ],
)
def test_listing_tokens_count_word_pieces_where_characters_under_count(text: str, tokens: int) -> None:
    assert listing_tokens(text) == tokens >= estimate_tokens(text)


@pytest.mark.parametrize(
    ("context", "overrides", "budget"),
    [
        (200_000, {}, 4000),
        (40_000, {}, 2000),
        (None, {}, 4000),
        (1_000_000, {}, 4000),
        (10_000, {}, 500),
        (200_000, {"threshold_pct": 0}, 0),
        (None, {"threshold_pct": 0}, 4000),
        (None, {"listing_max_tokens": 60000}, 10000),
        (333, {"threshold_pct": 3}, 9),
        (0, {}, 0),
    ],
)
def test_listing_budget(context: int | None, overrides: dict[str, int], budget: int) -> None:
    assert listing_budget(context, ToolSearchSettings(**overrides)) == budget


@pytest.mark.parametrize(
    ("text", "short"),
    [
        ("", ""),
        ("  Multi\n\tline   text  ", "Multi line text"),
        ("Fetch a URL.  Then convert it to markdown.", "Fetch a URL."),
        ("Is it done? Yes", "Is it done?"),
        ("Stop!\nNow", "Stop!"),
        ("Ends with its mark.", "Ends with its mark."),
        ("Calls api.github.com to list repos. Extra", "Calls api.github.com to list repos."),
        ("Supports v1.2 and v1.3; see docs", "Supports v1.2 and v1.3; see docs"),
        ("Version 2.0.", "Version 2.0."),
        ("Open files, e.g. PDFs and images. Second.", "Open files, e.g. PDFs and images."),
        ("Use i.e. this one. More", "Use i.e. this one."),
        ("E.g. this. More", "E.g. this."),
        ("Lists files, dirs, etc. and more. Second", "Lists files, dirs, etc. and more."),
        ("x" * 70, "x" * 60 + ELLIPSIS),
        ("x" * 60, "x" * 60),
        (
            "Create a new branch in the repository from the given reference commit",
            "Create a new branch in the repository from the given…",
        ),
        (
            "Alpha beta gamma delta epsilon zeta eta theta iota kappa, lambdamu nu xi",
            "Alpha beta gamma delta epsilon zeta eta theta iota kappa…",
        ),
        ("word " * 11 + "rest of it", "word " * 11 + "rest" + ELLIPSIS),
        ("a" * 10 + " " + "b" * 49 + " more words", "a" * 10 + " " + "b" * 49 + ELLIPSIS),
        ("a" * 59 + " b" + "c" * 10, "a" * 59 + ELLIPSIS),
        (
            "Ends on a list: one, two, three, four, five, six, seven, eight",
            "Ends on a list: one, two, three, four, five, six, seven…",
        ),
    ],
)
def test_short_description(text: str, short: str) -> None:
    assert short_description(text) == short


def test_ellipsis_is_one_character() -> None:
    short = short_description("y" * 100)
    assert short.endswith("\u2026")
    assert "..." not in short
    assert len(short) == 61


SMALL: DeferredByServer = {
    "time": [
        ("time__get_current_time", "Get the current time in a timezone.  Uses IANA names."),
        ("time__convert_time", "Convert time between timezones"),
    ],
    "fetch": [("fetch__fetch", "Fetches a URL from the internet, e.g. api.github.com. Returns markdown.")],
    "noop": [("noop__ping", "")],
    "empty": [],
}

SMALL_FULL = """\
Deferred tool catalog (call schemas via `tool_describe`, invoke via `tool_call`):
fetch tools (1):
- fetch__fetch: Fetches a URL from the internet, e.g. api.github.com.
noop tools (1):
- noop__ping
time tools (2):
- time__convert_time: Convert time between timezones
- time__get_current_time: Get the current time in a timezone."""

SMALL_NAMES = """\
Deferred tool catalog (call schemas via `tool_describe`, invoke via `tool_call`):
fetch tools (1):
fetch__fetch
noop tools (1):
noop__ping
time tools (2):
time__convert_time, time__get_current_time"""

# Names blocks in characters: wide 117 (only 2 tools), alpha 111, bravo 111 (a tie), tiny 23 (shorter
# than its 61-character summary line).
COLLAPSE: DeferredByServer = {
    "tiny": [("tiny__x", "")],
    "bravo": [(f"bravo__tool_{i:02}", "") for i in range(6)],
    "wide": [
        ("wide__import_the_entire_workspace_from_a_backup_archive", ""),
        ("wide__export_the_entire_workspace_as_archive", ""),
    ],
    "alpha": [(f"alpha__tool_{i:02}", "") for i in range(6)],
}

COLLAPSE_MIXED = """\
Deferred tool catalog (call schemas via `tool_describe`, invoke via `tool_call`):
alpha (6 tools — names not listed; discover via `tool_search`)
bravo tools (6):
bravo__tool_00, bravo__tool_01, bravo__tool_02, bravo__tool_03, bravo__tool_04, bravo__tool_05
tiny tools (1):
tiny__x
wide (2 tools — names not listed; discover via `tool_search`)"""

BIG: DeferredByServer = {
    "big": [(f"big__operation_number_{i:02}", "Does a thing.") for i in range(10)],
    "huge": [(f"huge__operation_number_{i:02}", "Does another thing.") for i in range(12)],
}

BIG_GROUPS = """\
Deferred tool catalog (call schemas via `tool_describe`, invoke via `tool_call`):
big (10 tools — names not listed; discover via `tool_search`)
huge (12 tools — names not listed; discover via `tool_search`)"""


@pytest.mark.parametrize(
    ("catalog", "expected", "form", "collapsed"),
    [
        (SMALL, SMALL_FULL, "full", ()),
        (SMALL, SMALL_NAMES, "names", ()),
        (COLLAPSE, COLLAPSE_MIXED, "mixed", ("wide", "alpha")),
        (BIG, BIG_GROUPS, "groups", ("huge", "big")),
    ],
)
def test_each_form_at_its_tightest_budget(
    catalog: DeferredByServer, expected: str, form: str, collapsed: tuple[str, ...]
) -> None:
    budget = listing_tokens(expected)
    listing = render_listing(catalog, budget)
    assert listing == Listing(text=expected, form=form, tokens=budget, collapsed=collapsed)
    assert render_listing(catalog, budget - 1).text != expected


@pytest.mark.parametrize(
    ("catalog", "budget"),
    [(BIG, listing_tokens(BIG_GROUPS) - 1), (SMALL, 0), (SMALL, -5), ({}, 4000), ({"empty": []}, 4000)],
)
def test_no_listing_when_nothing_fits_or_nothing_is_deferred(catalog: DeferredByServer, budget: int) -> None:
    assert render_listing(catalog, budget) == Listing(text=None, form="none", tokens=0)


@pytest.mark.parametrize(
    ("budget", "collapsed"),
    [
        (172, ("wide",)),
        (147, ("wide", "alpha")),
        (118, ("wide", "alpha", "bravo")),
        (90, ("wide", "alpha", "bravo")),
    ],
)
def test_collapse_order_is_largest_block_first_then_label(budget: int, collapsed: tuple[str, ...]) -> None:
    listing = render_listing(COLLAPSE, budget)
    assert listing.form == "mixed"
    assert listing.collapsed == collapsed
    assert listing.text is not None
    for label in collapsed:
        count = len(COLLAPSE[label])
        assert f"\n{label} ({count} tools — names not listed; discover via `tool_search`)" in listing.text


def test_a_collapse_that_only_grows_the_listing_is_not_a_fit() -> None:
    """Collapsing `tiny` last makes its block longer: below the 90 tokens of three summaries, nothing fits."""
    assert render_listing(COLLAPSE, 89).form == "none"


def test_mixed_form_lists_names_without_descriptions() -> None:
    catalog = {**COLLAPSE, "bravo": [(f"bravo__tool_{i:02}", "Described.") for i in range(6)]}
    listing = render_listing(catalog, listing_tokens(COLLAPSE_MIXED))
    assert listing.text == COLLAPSE_MIXED


def _shuffled(catalog: DeferredByServer, rng: random.Random) -> dict[str, list[tuple[str, str]]]:
    items = list(catalog.items())
    rng.shuffle(items)
    return {label: rng.sample(list(tools), len(tools)) for label, tools in items}


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("catalog", [SMALL, COLLAPSE, BIG])
def test_shuffled_input_gives_identical_bytes(seed: int, catalog: DeferredByServer) -> None:
    rng = random.Random(seed)
    for budget in range(0, 400, 7):
        assert render_listing(_shuffled(catalog, rng), budget) == render_listing(catalog, budget)


_labels = st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True)
_tools = st.lists(st.tuples(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), st.text(max_size=90)), max_size=8)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(catalog=st.dictionaries(_labels, _tools, max_size=6), budget=st.integers(-1, 500), seed=st.integers())
def test_any_catalog_in_any_order_renders_the_same_and_fits(catalog: DeferredByServer, budget: int, seed: int) -> None:
    listing = render_listing(catalog, budget)
    assert render_listing(_shuffled(catalog, random.Random(seed)), budget) == listing
    if listing.text is None:
        assert listing.form == "none"
    else:
        assert estimate_tokens(listing.text) <= listing.tokens == listing_tokens(listing.text) <= budget
        assert listing.text.startswith(HEADING + "\n")
        assert "\n\n" not in listing.text
