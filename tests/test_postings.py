"""A server's postings block gives back exactly what it was built from, however it stores them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from proxy.search._postings import Block, joined


def built(rows: dict[int, tuple[list[int], list[tuple[int, ...]]]], n_fields: int) -> dict[int, tuple[list, list]]:
    block = Block(rows, n_fields)
    out = {}
    for term_id in rows:
        part = block.get(term_id)
        assert part is not None
        ids, tfs = joined([part])
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


def test_a_term_joined_over_blocks_keeps_each_blocks_rows() -> None:
    small = Block({1: ([5, 6], [(1, 20), (0, 3)])}, 2)
    wide = Block({1: ([70_000, 400], [(300, 0), (16, 2)]), 2: ([1], [(1, 1)])}, 2)
    parts = [part for block in (small, wide) if (part := block.get(1)) is not None]
    ids, tfs = joined(parts)
    assert ids.tolist() == [5, 6, 70_000, 400] and tfs.dtype == np.uint16
    assert tfs.tolist() == [[1, 20], [0, 3], [300, 0], [16, 2]]
