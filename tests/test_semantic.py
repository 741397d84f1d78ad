"""Optional semantic extra: fusion is pure; the model tests run only where the extra is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.app import embed_pending
from proxy.search import SearchDoc, semantic


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
