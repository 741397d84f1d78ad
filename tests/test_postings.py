"""A server's postings block gives back exactly what it was built from, however it stores them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from proxy.search._postings import Block


def built(rows: dict[int, tuple[list[int], list[tuple[int, ...]]]], n_fields: int) -> dict[int, tuple[list, list]]:
    block = Block(rows, n_fields)
    out = {}
    for term_id in rows:
        chunk = block.get(term_id)
        assert chunk is not None
        ids, tfs = chunk
        assert ids.dtype == np.int32 and tfs.shape == (len(ids), n_fields)
        out[term_id] = (ids.tolist(), [tuple(row) for row in tfs.tolist()])
    assert block.get(max(rows) + 1) is None
    return out


@pytest.mark.parametrize("n_fields", [6, 5])
@pytest.mark.parametrize("spread", [400, 200_000])  # document ids within a uint16 of each other, or not
def test_a_block_returns_its_postings_exactly(n_fields: int, spread: int) -> None:
    rng = random.Random(spread + n_fields)
    counts = [0, 0, 0, 1, 2, 14, 15, 16, 255]
    rows = {
        term_id: (sorted(rng.sample(range(1000, 1000 + spread), 30)),
                  [tuple(rng.choice(counts) for _ in range(n_fields)) for _ in range(30)])
        for term_id in rng.sample(range(500), 40)
    }
    assert built(rows, n_fields) == rows


def test_counts_past_255_widen_and_saturate_at_65535() -> None:
    rows = {3: ([7, 9], [(300, 0, 1), (70_000, 15, 16)])}
    assert built(rows, 3) == {3: ([7, 9], [(300, 0, 1), (65_535, 15, 16)])}
