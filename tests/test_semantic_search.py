"""`tool_search` with `tool_search.semantic: on`, through a real Views, the gateway's embedding task
and the bridge. The model tests skip where the optional extra (`toolbridge[semantic]`) is missing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from inprocess import tool

from proxy.app import embed_pending, keep_embeddings
from proxy.config import ToolSearchSettings, ToolsetsConfig
from proxy.downstream import bridge
from proxy.registry import Registry
from proxy.search import semantic
from proxy.views import Views

needs_model = pytest.mark.skipif(not semantic.available(), reason="semantic extra not installed")
SEMANTIC_ON = ToolsetsConfig(tool_search=ToolSearchSettings(semantic="on"))
RAIN = "will it rain tomorrow"  # no word of it is in the catalog: lexical search finds nothing


def fill(registry: Registry) -> None:
    registry.set_server_tools("weather", [tool("get_conditions", "Current meteorological conditions for a city")])
    registry.set_server_tools("fs", [tool("read_file", "Read the contents of a file"),
                                     tool("write_file", "Write text to a file")])
    registry.set_server_tools("mail", [tool("send_message", "Send an email message to a recipient")])


def catalog(cache_dir: Path | None, config: ToolsetsConfig = SEMANTIC_ON) -> Views:
    registry = Registry()
    fill(registry)
    return Views(registry, config, lambda server: True, cache_dir=cache_dir)


def search(cat: Views, query: str, limit: int = 3) -> list[str]:
    return bridge.search(cat, cat.for_profile("default"), {"queries": [query], "limit": limit})["results"][0]["matches"]


@dataclass
class Encoder:
    """Wraps the model's forward pass: records each call's thread and texts, and can hold calls at a gate."""

    calls: list[tuple[int, list[str]]] = field(default_factory=list)
    entered: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event | None = None

    def tool_texts(self) -> int:
        return sum(len(texts) for thread, texts in self.calls if thread != threading.get_ident())


@pytest.fixture
def encoder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Encoder]:
    spy = Encoder()
    original = semantic.MiniLM.embed

    def embed(self: semantic.MiniLM, texts: Sequence[str]) -> Any:
        spy.calls.append((threading.get_ident(), list(texts)))
        spy.entered.set()
        if spy.gate is not None:
            spy.gate.wait(5)
        return original(self, texts)

    monkeypatch.setattr(semantic.MiniLM, "embed", embed)
    yield spy
    if spy.gate is not None:
        spy.gate.set()


@needs_model
@pytest.mark.anyio
async def test_semantic_search_finds_what_lexical_search_misses(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    assert search(cat, RAIN) == []  # before the embeddings are in, the search is lexical
    await embed_pending(cat.semantic)
    assert search(cat, RAIN)[0] == "weather__get_conditions"
    assert search(catalog(tmp_path, ToolsetsConfig()), RAIN) == []


@needs_model
@pytest.mark.anyio
async def test_a_scope_found_ready_is_not_ready_once_one_of_its_tools_changes(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    await embed_pending(cat.semantic)
    scope = cat.for_profile("default").deferred
    assert cat.semantic.ready(scope)
    cat.registry.set_server_tools("fs", [tool("read_file", "Read a whole file"), tool("write_file", "Write a file")])
    assert not cat.semantic.ready(scope)
    await embed_pending(cat.semantic)
    assert cat.semantic.ready(scope)


@needs_model
@pytest.mark.anyio
async def test_a_query_whose_ranking_the_view_keeps_is_not_encoded_again(
    tmp_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "QUERY_CACHE", 1)  # each new query's vector pushes the last one out
    cat = catalog(tmp_path)
    await embed_pending(cat.semantic)
    view = cat.for_profile("default")
    encoder.calls.clear()
    for query in (RAIN, "send an email", RAIN):
        arguments = {"queries": [query]}
        await bridge.prepare_search(cat, view, arguments)
        assert bridge.search(cat, view, arguments)["results"][0]["matches"]
    assert [texts for _, texts in encoder.calls] == [[RAIN], ["send an email"]]


@needs_model
@pytest.mark.anyio
async def test_an_exact_name_still_ranks_first(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    await embed_pending(cat.semantic)
    for name in ("write_file", "fs__read_file", "send_message"):
        assert search(cat, name)[0].endswith(name)


@needs_model
@pytest.mark.anyio
async def test_embedding_runs_off_the_event_loop_and_search_stays_lexical_meanwhile(
    tmp_path: Path, encoder: Encoder
) -> None:
    cat = catalog(tmp_path)
    encoder.gate = threading.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(embed_pending, cat.semantic)
        with anyio.fail_after(5):
            await anyio.to_thread.run_sync(encoder.entered.wait)
        assert search(cat, "read file")[0] == "fs__read_file"  # the loop serves while the worker is held
        assert search(cat, RAIN) == []
        encoder.gate.set()
    assert encoder.calls and all(thread != threading.get_ident() for thread, _ in encoder.calls)
    assert search(cat, RAIN)[0] == "weather__get_conditions"


@needs_model
@pytest.mark.anyio
async def test_a_fresh_catalog_reuses_the_cache_on_disk(tmp_path: Path, encoder: Encoder) -> None:
    await embed_pending(catalog(tmp_path).semantic)
    assert encoder.tool_texts() == 4 and len(list(tmp_path.glob("minilm-*.npy"))) == 1
    encoder.calls.clear()
    fresh = catalog(tmp_path)
    await embed_pending(fresh.semantic)
    assert encoder.tool_texts() == 0
    assert search(fresh, RAIN)[0] == "weather__get_conditions"


class Announcement(logging.Handler):
    """Sets `event` when the log says ranking is hybrid (the log runs on the event loop's thread)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.event, self.line = anyio.Event(), ""

    def emit(self, record: logging.LogRecord) -> None:
        if "ranks hybrid" in record.getMessage():
            self.line = record.getMessage()
            self.event.set()


async def warm(index: semantic.SemanticIndex | None, registry: Registry) -> str:
    """Run the gateway's embedding task until the log says ranking is hybrid; that log line."""
    assert index is not None
    logger, announcement = logging.getLogger(semantic.__name__), Announcement()
    level, logger.level = logger.level, logging.INFO
    logger.addHandler(announcement)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(keep_embeddings, index, registry)
            with anyio.fail_after(30):
                await announcement.event.wait()
            tg.cancel_scope.cancel()
    finally:
        logger.removeHandler(announcement)
        logger.level = level
    return announcement.line


@needs_model
@pytest.mark.anyio
async def test_a_restarted_gateway_with_an_unchanged_fleet_reaches_hybrid_without_embedding(
    tmp_path: Path, encoder: Encoder
) -> None:
    first = catalog(tmp_path, ToolsetsConfig())
    assert "4 computed" in await warm(first.semantic, first.registry)
    encoder.calls.clear()
    restarted = catalog(tmp_path, ToolsetsConfig())
    assert "0 computed, 4 from the cache" in await warm(restarted.semantic, restarted.registry)
    assert encoder.tool_texts() == 0
    assert search(restarted, RAIN)[0] == "weather__get_conditions"
    restarted.registry.set_server_tools("mail", [tool("send_message", "Send an e-mail to someone")])  # a reload
    assert "1 computed, 0 from the cache" in await warm(restarted.semantic, restarted.registry)


@needs_model
@pytest.mark.anyio
async def test_the_background_task_embeds_servers_as_they_arrive(tmp_path: Path, encoder: Encoder) -> None:
    registry = Registry()
    cat = Views(registry, SEMANTIC_ON, lambda server: True, cache_dir=tmp_path)
    index = cat.semantic
    assert index is not None
    async with anyio.create_task_group() as tg:
        await tg.start(keep_embeddings, index, registry)
        fill(registry)
        with anyio.fail_after(5):
            while index.pending:
                await anyio.sleep(0.01)
        assert search(cat, RAIN)[0] == "weather__get_conditions"
        tg.cancel_scope.cancel()
    assert encoder.tool_texts() == 4


def test_semantic_search_can_be_turned_off(tmp_path: Path) -> None:
    cat = catalog(tmp_path, ToolsetsConfig(tool_search=ToolSearchSettings(semantic="off")))
    assert cat.semantic is None
    assert search(cat, "read file")[0] == "fs__read_file"
    assert not list(tmp_path.iterdir())


@needs_model
@pytest.mark.anyio
async def test_by_default_search_turns_hybrid_once_warm_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cat = catalog(tmp_path, ToolsetsConfig())  # `semantic: auto`, on any CPU
    assert cat.semantic is not None and "lexically until the tools are embedded" in caplog.text
    assert search(cat, RAIN) == []
    assert "tool_search ranks hybrid: 4 tools embedded" in await warm(cat.semantic, cat.registry)
    assert search(cat, RAIN)[0] == "weather__get_conditions"


def test_by_default_a_missing_extra_means_lexical_search_without_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(semantic, "available", lambda: False)
    with caplog.at_level(logging.INFO, logger="proxy.views"):
        cat = catalog(tmp_path, ToolsetsConfig())
    assert cat.semantic is None
    assert search(cat, "read file")[0] == "fs__read_file"
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_requested_but_not_installed_searches_lexically_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(semantic, "available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="proxy.views"):
        cat = catalog(tmp_path)
    assert cat.semantic is None
    assert search(cat, "read file")[0] == "fs__read_file"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "toolbridge[semantic]" in warnings[0]


@needs_model
@pytest.mark.anyio
async def test_nonsense_still_finds_nothing_so_the_retry_hint_shows(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    await embed_pending(cat.semantic)
    answer = bridge.search(cat, cat.for_profile("default"), {"queries": ["open the pod bay doors"]})
    assert answer["results"][0]["matches"] == [] and "hint" in answer["results"][0]


@needs_model
@pytest.mark.anyio
async def test_query_vectors_are_computed_off_the_event_loop(tmp_path: Path, encoder: Encoder) -> None:
    cat = catalog(tmp_path)
    await embed_pending(cat.semantic)
    before = len(encoder.calls)
    await bridge.prepare_search(cat, cat.for_profile("default"), {"queries": [RAIN, "mail a colleague"]})
    assert [texts for _, texts in encoder.calls[before:]] == [[RAIN, "mail a colleague"]]
    assert all(thread != threading.get_ident() for thread, _ in encoder.calls[before:])
    assert search(cat, RAIN)[0] == "weather__get_conditions"
    assert len(encoder.calls) == before + 1  # the search itself ran no model


@needs_model
@pytest.mark.anyio
async def test_no_query_is_encoded_while_the_session_still_searches_lexically(tmp_path: Path, encoder: Encoder) -> None:
    cat = catalog(tmp_path)
    await embed_pending(cat.semantic)
    cat.registry.set_server_tools("notes", [tool("add_note", "Write a note down")])  # not embedded yet
    before = len(encoder.calls)
    await bridge.prepare_search(cat, cat.for_profile("default"), {"queries": ["jot something down"]})
    assert len(encoder.calls) == before
    assert search(cat, "add note")[0] == "notes__add_note"


@needs_model
@pytest.mark.anyio
async def test_each_step_of_a_long_request_finds_its_tool(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    index = cat.semantic
    assert index is not None
    await embed_pending(index)
    weather = "look up the current weather conditions in Lisbon for our long weekend trip"
    request = f"{weather}, and then send an email message to my sister with the forecast"
    similarity = dict(index.rank(request, 4, cat.for_profile("default").deferred))
    model = semantic.load_model()
    mail = "mail__send_message"
    mail_vector = model.embed([semantic.doc_text("mail", "send_message", "Send an email message to a recipient")])[0]
    # the mail tool scores its match with the clause that asks for it, well above its match with the whole request
    assert similarity[mail] > float(mail_vector @ model.embed([request])[0]) + 0.05
    assert set(search(cat, request, limit=2)) == {"weather__get_conditions", mail}
