"""Search quality gate (issues 5 and 16): recall@5 and MRR through `tool_search` on the shared real catalogs.

Queries run through `proxy.bridge.search` over a registry and catalog built as the server builds them
(see bench/search_eval.py; `--e2e` checks a served fleet ranks identically). The hybrid tests embed both
catalogs once a run, into a cache every worker shares (~10 s of CPU), and skip where the `semantic` extra is
missing.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from conftest import exclusive

from bench.search_eval import (
    DATASETS,
    Report,
    build_catalog,
    catalogs_dir,
    cross_validated,
    hybrid_cross_validated,
    load_servers,
    run_dataset,
    run_hybrid,
)
from proxy.search import semantic

# dataset -> (min recall@5, min MRR), a little under what bench/search_eval.py measures (issue 23):
# dev 0.922 / 0.780, args 0.862 / 0.760, tasks 0.669 / 0.770, LiveMCPBench 0.378 / 0.469, values/tune 0.866 / 0.766.
TARGETS = {
    "real-fleet/dev": (0.90, 0.76),
    "real-fleet/args": (0.84, 0.74),
    "real-fleet/tasks": (0.65, 0.75),
    "livemcpbench": (0.37, 0.45),
    "values/tune": (0.85, 0.74),
}
# hybrid, min recall@5: dev 0.958 (CV 0.958), args 0.869 (CV 0.869), tasks 0.665 (CV 0.665), LiveMCPBench 0.452.
HYBRID_TARGETS = {"real-fleet/dev": 0.94, "real-fleet/args": 0.855, "real-fleet/tasks": 0.65, "livemcpbench": 0.44}
needs_model = pytest.mark.skipif(not semantic.available(), reason="semantic extra not installed")


def _root() -> Path:
    root = catalogs_dir()
    if not (root / "real-fleet.json").is_file():
        pytest.skip(f"catalogs not found at {root} (set TOOLBRIDGE_CATALOGS, or restore bench/catalogs)")
    return root


@cache
def reports(dataset: str) -> dict[str, Report]:
    catalog, queries = DATASETS[dataset]
    return run_dataset(_root(), catalog, queries)


@pytest.fixture(scope="module")
def embeddings(run_dir: Path) -> Path:
    """One embedding cache for the whole run: the first worker to get here embeds every hybrid catalog under a
    file lock (~10 s of CPU); the others wait for it, then read the cache."""
    directory = run_dir / "embeddings"
    with exclusive(run_dir / "embeddings.lock"):
        if not (directory / "complete").exists():
            for catalog in sorted({DATASETS[dataset][0] for dataset in HYBRID_TARGETS}):
                build_catalog(load_servers(_root() / catalog), directory)
            (directory / "complete").touch()
    return directory


@pytest.mark.parametrize("dataset", sorted(TARGETS))
def test_tool_search_meets_target(dataset: str) -> None:
    min_recall, min_mrr = TARGETS[dataset]
    r = reports(dataset)["tool_search"]
    assert r.recall5 >= min_recall, r
    assert r.mrr >= min_mrr, r


@pytest.mark.parametrize("dataset", sorted(TARGETS))
def test_tool_search_beats_fastmcp_bm25(dataset: str) -> None:
    ours, plain = reports(dataset)["tool_search"], reports(dataset)["fastmcp-bm25"]
    assert ours.recall5 > plain.recall5 and ours.hit5 > plain.hit5, (ours, plain)


# On the task requests FastMCP's BM25 more often puts one of the 2-6 gold tools first (MRR 0.753 against
# 0.742) while finding fewer of them (R@5 0.486 against 0.635); the README's table states both.
@pytest.mark.parametrize("dataset", sorted(set(TARGETS) - {"real-fleet/tasks"}))
def test_tool_search_ranks_the_first_gold_higher_than_fastmcp_bm25(dataset: str) -> None:
    ours, plain = reports(dataset)["tool_search"], reports(dataset)["fastmcp-bm25"]
    assert ours.mrr > plain.mrr, (ours, plain)


def test_cross_validated_dev_recall_meets_target() -> None:
    """The fitting procedure, scored only on folds it was not fitted on (issue 16: CV dev R@5 >= 0.88)."""
    cv = cross_validated(_root())
    assert cv["real-fleet/dev"].recall5 >= 0.88, cv
    assert cv["real-fleet/args"].recall5 > reports("real-fleet/args")["fastmcp-bm25"].recall5, cv


# Since the values a request names count apart (issue 23), the task requests' lexical R@5 (0.669) is level with
# the hybrid's (0.667); docs/search.md states it.
@needs_model
@pytest.mark.parametrize("dataset", sorted(HYBRID_TARGETS))
def test_hybrid_meets_target_and_beats_lexical(dataset: str, embeddings: Path) -> None:
    catalog, queries = DATASETS[dataset]
    hybrid = run_hybrid(_root(), catalog, queries, embeddings)["hybrid"]
    assert hybrid.recall5 >= HYBRID_TARGETS[dataset], hybrid
    if dataset != "real-fleet/tasks":
        assert hybrid.recall5 > reports(dataset)["tool_search"].recall5, (hybrid, reports(dataset))


@needs_model
def test_hybrid_cross_validated_dev_recall_meets_target(embeddings: Path) -> None:
    """Score fusion with its lexical share fitted on the other folds (issue 16: CV dev R@5 >= 0.94)."""
    assert hybrid_cross_validated(_root(), embeddings)["real-fleet/dev"].recall5 >= 0.94


@needs_model
def test_hybrid_livemcpbench_recall_meets_the_issue_target(embeddings: Path) -> None:
    """Issue 16: hybrid LiveMCPBench R@5 about 0.45 for the model in its integer-product form: 0.452 on the VNNI
    machine it was first measured on, 0.449 on another (AVX-512 VNNI, 2026-12-05), 0.445 with u8s8 kernels. The
    rounding of int8 dot products differs by kernel, so the bound is the lowest of those; where the load-time probe
    keeps the file as shipped, the guard above (0.44) is what holds."""
    if semantic.load_model().form != "integer products":
        pytest.skip("the load-time probe kept the model as shipped: the guard above holds there")
    catalog, queries = DATASETS["livemcpbench"]
    assert run_hybrid(_root(), catalog, queries, embeddings)["hybrid"].recall5 >= 0.445
