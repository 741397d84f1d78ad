"""Optional semantic extra: fusion is pure; the model tests run only where the extra is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.app import embed_pending
from proxy.search import SearchDoc, semantic


def test_fuse_adds_normalised_lexical_scores_to_similarities() -> None:
    lexical = [("a", 10.0), ("b", 5.0), ("c", 1.0)]
    similarity = {"a": 0.3, "b": 0.6, "c": 0.2, "d": 0.5}
    # 0.5 * score / 10 + 0.5 * cosine: a 0.65, b 0.55, d 0.25, c 0.15
    assert semantic.fuse(lexical, similarity, limit=4, weight=0.5) == ["a", "b", "d", "c"]
    assert semantic.fuse(lexical, similarity, limit=2, weight=0.0) == ["b", "d"]
    assert semantic.fuse(lexical, {}, limit=2, weight=1.0) == ["a", "b"]
    assert semantic.fuse([], {}, limit=3) == []


@pytest.mark.skipif(not semantic.available(), reason="semantic extra not installed")
def test_embeddings_are_cached_by_content(tmp_path: Path) -> None:
    model = semantic.load_model()
    cache = semantic.EmbeddingCache(model, tmp_path)
    first = cache.get(["create a github issue", "open a new ticket on github", "weather forecast"])
    assert len(list(tmp_path.glob("*.npy"))) == 3
    again = semantic.EmbeddingCache(model, tmp_path).get(["weather forecast"])
    assert (again[0] == first[2]).all()
    assert float(first[0] @ first[1]) > 0.5 > float(first[0] @ first[2])


def docs(*names: str) -> tuple[SearchDoc, ...]:
    return tuple(SearchDoc(f"s__{n}", "s", n, "", ()) for n in names)


def test_vectors_computed_for_tools_that_changed_meanwhile_are_dropped() -> None:
    index = semantic.SemanticIndex(None)
    index.set_server("s", docs("a"))
    computing = index.pending["s"]
    index.set_server("s", docs("a", "b"))
    index.install("s", computing, [[1.0]])
    assert index.pending["s"] == docs("a", "b")
    index.set_server("s", ())
    assert index.pending == {}


@pytest.mark.anyio
async def test_a_failed_embedding_is_logged_and_leaves_the_server_lexical(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    index = semantic.SemanticIndex(None)
    index.set_server("s", docs("a"))

    def broken(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(index, "embed", broken)
    await embed_pending(index)
    assert index.pending == {} and not index.ready({"s__a"})
    assert "server s" in caplog.text and "disk full" in caplog.text
