"""Search quality gate (issue 5): dev-set recall@5 and MRR on the shared real catalogs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# bench/ is not an installed package; make the repo root importable when pytest runs from anywhere.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.search_eval import DATASETS, catalogs_dir, run_dataset

# dataset -> (min recall@5, min MRR)
THRESHOLDS = {"real-fleet/dev": (0.85, 0.72), "livemcpbench": (0.33, 0.42)}


@pytest.mark.parametrize("dataset", sorted(THRESHOLDS))
def test_search_quality(dataset: str) -> None:
    root = catalogs_dir()
    catalog, queries = DATASETS[dataset]
    if not (root / catalog).is_file():
        pytest.skip(f"catalogs not found at {root} (set TOOLBRIDGE_CATALOGS or check out ../shared)")
    report = run_dataset(root, catalog, queries)["toolbridge"]
    min_recall, min_mrr = THRESHOLDS[dataset]
    assert report.recall5 >= min_recall, report
    assert report.mrr >= min_mrr, report
