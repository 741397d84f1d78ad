"""Search quality gate (issue 5): recall@5 and MRR through `tool_search` on the shared real catalogs.

Queries run through `proxy.bridge.search` over a registry and catalog built as the server builds them
(see bench/search_eval.py; `--e2e` checks a served fleet ranks identically).
"""

from __future__ import annotations

from functools import cache

import pytest

from bench.search_eval import DATASETS, Report, catalogs_dir, run_dataset

# dataset -> (min recall@5, min MRR): the targets. Measured: dev 0.906 / 0.758, LiveMCPBench 0.360 / 0.445.
TARGETS = {"real-fleet/dev": (0.85, 0.72), "livemcpbench": (0.33, 0.42)}


@cache
def reports(dataset: str) -> dict[str, Report]:
    root = catalogs_dir()
    catalog, queries = DATASETS[dataset]
    if not (root / catalog).is_file():
        pytest.skip(f"catalogs not found at {root} (set TOOLBRIDGE_CATALOGS or check out ../shared)")
    return run_dataset(root, catalog, queries)


@pytest.mark.parametrize("dataset", sorted(TARGETS))
def test_tool_search_meets_target(dataset: str) -> None:
    min_recall, min_mrr = TARGETS[dataset]
    r = reports(dataset)["tool_search"]
    assert r.recall5 >= min_recall, r
    assert r.mrr >= min_mrr, r


@pytest.mark.parametrize("dataset", sorted(TARGETS))
def test_tool_search_beats_plain_bm25(dataset: str) -> None:
    ours, plain = reports(dataset)["tool_search"], reports(dataset)["plain-bm25"]
    assert ours.recall5 > plain.recall5 and ours.mrr > plain.mrr, (ours, plain)
