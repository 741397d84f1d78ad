"""Optional semantic extra: fusion is pure; the model tests run only where the extra is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy import semantic


def test_fuse_rewards_agreement_and_keeps_both_lists() -> None:
    fused = semantic.fuse(["a", "b", "c"], ["b", "d"], limit=4)
    assert fused[0] == "b" and set(fused) == {"a", "b", "c", "d"}
    assert semantic.fuse([], [], limit=3) == []


@pytest.mark.skipif(not semantic.available(), reason="semantic extra not installed")
def test_embeddings_are_cached_by_content(tmp_path: Path) -> None:
    model = semantic.MiniLM()
    cache = semantic.EmbeddingCache(model, tmp_path)
    first = cache.get(["create a github issue", "open a new ticket on github", "weather forecast"])
    assert len(list(tmp_path.glob("*.npy"))) == 3
    again = semantic.EmbeddingCache(model, tmp_path).get(["weather forecast"])
    assert (again[0] == first[2]).all()
    assert float(first[0] @ first[1]) > 0.5 > float(first[0] @ first[2])
