"""How the lexical ranking reads a request's wording (issue 30): apostrophes and accents as a person types them,
numbers as values, a word said many times, and a long request against a long generic description.

Each test is a mechanism on a small hand-made fleet, built so that it fails without the rule it names; what the
rules do to ranking quality is measured on the public sets (docs/search.md).
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from test_search import doc

from proxy.search import SearchDoc, SearchIndex
from proxy.search._index import RANKING
from proxy.search._postings import accumulate
from proxy.search._stemming import split_words


def indexed(fleet: dict[str, list[SearchDoc]], **ranking: float) -> SearchIndex:
    index = SearchIndex(replace(RANKING, **ranking))
    for server, docs in fleet.items():
        index.set_server(server, docs)
    return index


@pytest.mark.parametrize("apostrophe", ["'", "\u2019", "\u02bc"])
def test_possessives_and_contractions_are_their_word_and_negations_no_word(apostrophe: str) -> None:
    text = "I'm at Denver's caf\u00e9, it's what you'll see; don't, can't, won't. O'Reilly".replace("'", apostrophe)
    assert split_words(text) == ["i", "at", "denver", "cafe", "it", "what", "you", "see", "o", "reilly"]


def test_accents_and_compatibility_forms_fold_to_their_letters() -> None:
    assert split_words("Z\u00fcrich na\u00efve r\u00e9sum\u00e9 \ufb01le Stra\u00dfe") == [
        "zurich", "naive", "resume", "file", "stra", "e"]
    assert split_words("\u65e5\u672c plain ascii") == ["plain", "ascii"]


MEDICAL_AND_MAPS = {
    "medical": [
        doc("medical", "maintenance_fluids", "Calculates maintenance IV fluid rate (mL/hr) using the 4-2-1 Rule."),
        doc("medical", "bmi", "Body mass index from weight in kg and height in m."),
    ],
    "maps": [
        doc("maps", "directions", "Route directions between two places by car, bike or on foot."),
        doc("maps", "search_nearby", "Search for places nearby, such as cafes or museums."),
    ],
}


@pytest.mark.parametrize("apostrophe", ["'", "\u2019"])
def test_a_contraction_s_letters_match_no_unit_or_rule(apostrophe: str) -> None:
    """"I'm" and "Denver's" once gave the terms "m" and "s", which matched a tool with "m" (metres) in it."""
    index = indexed(MEDICAL_AND_MAPS)
    query = "I'm planning a bike ride from Denver's museum, can you get me directions".replace("'", apostrophe)
    assert index.search(query, limit=1) == ["maps__directions"]
    assert "medical__bmi" not in index.search(query, limit=4)


def test_an_accented_word_matches_its_plain_spelling() -> None:
    index = indexed(MEDICAL_AND_MAPS)
    assert index.search("caf\u00e9", limit=1) == ["maps__search_nearby"]  # not "caf", a word no tool has


def test_a_number_in_a_request_weighs_half_a_word() -> None:
    """"between 9 and noon", "a 4-star rating" are values, "HTTP 404" may name a thing: a number counts, at half."""
    shipped = dict(indexed(MEDICAL_AND_MAPS).search_scored("4 2 1", limit=1))
    whole = dict(indexed(MEDICAL_AND_MAPS, numbers=1.0).search_scored("4 2 1", limit=1))
    assert list(shipped) == list(whole) == ["medical__maintenance_fluids"]
    assert shipped["medical__maintenance_fluids"] == pytest.approx(whole["medical__maintenance_fluids"] / 2)
    assert indexed(MEDICAL_AND_MAPS).search("directions for 4 people", limit=1) == ["maps__directions"]


REPEATED = {
    "files": [doc("files", "read_file", "Read a file from disk."), doc("files", "tail_log", "Show the end of a log.")],
    "logs": [doc("logs", "query_logs", "Query the log store for errors in a time range.")],
}


def test_a_word_said_many_times_weighs_at_most_twice() -> None:
    """A chatty request repeating a word is not five times more about it than about its other words."""
    query = "the file, that file, this file, the file again, a file: errors in a time range"
    assert indexed(REPEATED).search(query, limit=1) == ["logs__query_logs"]
    assert indexed(REPEATED, repeats=100.0).search(query, limit=1) == ["files__read_file"]


GENERIC_AND_SPECIFIC = {  # a server of many tools, one with a long generic description (as BioMCP's `think`)
    "bio": [
        doc("bio", "gene_search", "Search genes by symbol."),
        doc("bio", "trial_search", "Search clinical trials by condition."),
        doc("bio", "article_search", "Search articles in PubMed."),
        doc("bio", "think", "Think step by step. You must use this tool first: plan your analysis, start "
            "with a number of thoughts, estimate the total number of thoughts needed, revise them as you go, find "
            "the sources to search, check the data each source gives, compare the options you find, summarise what "
            "you learnt, keep notes on each decision and only then give the best answer you can."),
    ],
    "weather": [
        doc("weather", "forecast", "Weather forecast for a city: temperature, rain, humidity and wind."),
        doc("weather", "alerts", "Severe weather alerts for a region."),
    ],
}


def test_a_long_request_is_answered_by_a_few_words_matched_well_not_many_matched_by_chance() -> None:
    """A long generic description touches many words of a long request; the tool that answers it matches a few."""
    query = ("I want to plan a trip: start with the weather forecast, temperature, rain, humidity and wind for the "
             "city, then estimate the total number of options, check the data, compare sources, summarise, revise my "
             "notes on each decision with the analysis of what I learnt and the thoughts needed, and give the best "
             "answer")
    assert indexed(GENERIC_AND_SPECIFIC).search(query, limit=1) == ["weather__forecast"]
    assert indexed(GENERIC_AND_SPECIFIC, best_terms=0).search(query, limit=1) == ["bio__think"]


def test_accumulating_a_document_s_best_terms_equals_summing_its_largest_contributions() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        size, best = int(rng.integers(1, 30)), int(rng.integers(1, 6))
        plan = []
        for _ in range(int(rng.integers(0, 12))):
            ids = rng.choice(size, size=int(rng.integers(0, size + 1)), replace=False)
            plan.append((float(rng.uniform(0.1, 3)), ids, rng.uniform(0, 2, len(ids))))
        parts: dict[int, list[float]] = {}
        for idf, ids, impacts in plan:
            for i, impact in zip(ids.tolist(), impacts.tolist(), strict=True):
                parts.setdefault(i, []).append(idf * impact)
        expected = np.zeros(size)
        for i, found in parts.items():
            expected[i] = sum(sorted(found, reverse=True)[:best])
        assert np.allclose(accumulate(plan, size, best), expected)
        assert np.allclose(accumulate(plan, size), [sum(parts.get(i, [])) for i in range(size)])


def test_a_short_request_ranks_as_it_did_without_a_best_terms_limit() -> None:
    rnd = random.Random(4)
    words = ["plan", "weather", "forecast", "rain", "wind", "city", "total", "data", "sources", "answer", "file", "log",
             "errors"]
    fleet = GENERIC_AND_SPECIFIC | REPEATED
    for _ in range(50):
        query = " ".join(rnd.sample(words, rnd.randint(1, 4)))
        assert indexed(fleet).search(query, limit=5) == indexed(fleet, best_terms=0).search(query, limit=5), query
