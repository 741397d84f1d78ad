"""What a search costs next to what a call costs, through the real proxy over stdio.

Serves about 10,000 real tools (the real-fleet catalog, served 12 times over by one upstream)
plus a one-tool echo server through `toolbridge serve`, then measures side by side in one run: a
call straight to the echo server, the same call proxied through `tool_call`, and `tool_search`
over everything (7 queries in turn, so mostly repeated ones, whose rankings the session's view keeps, and the
60 development queries once each); and, for reference, the same searches in-process (`bridge.search`, no
transport), with the ranking of a new query apart from computing its vector.
`--semantic` turns on hybrid search with a cold embedding cache: the proxied call is also timed while
the gateway embeds the ~10,000 tools in the background, and `tool_search` is timed once they are all in.
Run: `.venv/bin/python -m bench.call_latency [--catalogs DIR] [--semantic]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import Client, StdioServerParameters, stdio_client

from bench.search_eval import DEFAULT_CACHE_DIR, build_catalog
from proxy.downstream import bridge

REPO = Path(__file__).resolve().parent.parent
CATALOG_SERVER = str(REPO / "tests" / "servers" / "catalog_server.py")
QUERIES = ["github create issue", "read a file", "take a browser screenshot", "list azure storage accounts",
           "add a row to a spreadsheet", "what time is it in Tokyo", "query mongodb collection"]


def _stdio(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=list(args), cwd=str(REPO))


def _write_config(directory: Path, catalog: Path, copies: int, semantic: bool) -> None:
    (directory / "upstreams").mkdir()
    servers = {"big": ["--catalog", str(catalog), "--copies", str(copies)],
               "echo": ["--tools", "1", "--prefix", "echo"]}
    for name, args in servers.items():
        spec = {"command": sys.executable, "args": [CATALOG_SERVER, *args], "connect_timeout": 120}
        (directory / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    settings: dict[str, object] = {"startup_wait": 120}
    if semantic:
        settings["tool_search"] = {"semantic": "on"}
    (directory / "toolsets.yaml").write_text(yaml.safe_dump(settings))


async def _timed(runs: int, action: Callable[[int], Awaitable[object]]) -> list[float]:
    await action(0)  # warm up
    samples = []
    for index in range(runs):
        started = time.perf_counter()
        await action(index)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _row(label: str, samples: list[float], reference: float) -> str:
    median = statistics.median(samples)
    p95 = sorted(samples)[int(len(samples) * 0.95) - 1]
    return f"{label:<40} p50 {median:7.2f} ms   p95 {p95:7.2f} ms   {median / reference:5.2f}x direct"


EMBED_WAIT = 1200  # s a cold 10k-tool embedding may take on a loaded 2-core machine


def _embedded(cache: Path) -> int:
    """Vectors in the gateway's embedding cache file (one per model, replaced whole when it is saved)."""
    import numpy as np

    return sum(len(np.load(path, mmap_mode="r")) for path in cache.glob("minilm-*.npy")) if cache.is_dir() else 0


async def _calls_while_embedding(call: Callable[[int], Awaitable[object]], cache: Path, tools: int) -> list[float]:
    """Proxied calls, back to back, for as long as the gateway is still embedding (its cache has fewer
    vectors than there are tools); then wait, bounded, until it is done.

    Raises:
        TimeoutError: the embedding took longer than EMBED_WAIT.
    """
    samples: list[float] = []
    with anyio.fail_after(EMBED_WAIT):
        while _embedded(cache) < tools:
            for _ in range(50):
                started = time.perf_counter()
                await call(len(samples))
                samples.append((time.perf_counter() - started) * 1000)
    return samples


def _in_process_ms(catalog: Path, copies: int, runs: int, semantic: bool, fresh: list[str]) -> dict[str, list[float]]:
    """`bridge.search` on the tools the proxy serves (named as tests/servers/catalog_server.py does): a
    repeated query (its ranking kept by the view), and each development query once, new (its vector computed,
    as `tool_search` does first) and then ranked again under another limit (vector known, ranking not)."""
    servers = json.loads(catalog.read_text())["servers"]
    tools = [{**t, "name": f"{name}{copy}_{t['name']}"}
             for copy in range(copies) for name, entry in sorted(servers.items()) for t in entry["tools"]]
    built = build_catalog({"big": tools}, DEFAULT_CACHE_DIR if semantic else None)
    view = built.for_profile("default")

    async def timed(query: str, limit: int) -> float:
        started = time.perf_counter()
        await bridge.prepare_search(built, view, {"queries": [query]})
        bridge.search(built, view, {"queries": [query], "limit": limit})
        return (time.perf_counter() - started) * 1000

    async def measure() -> dict[str, list[float]]:
        for query in QUERIES:  # warm: the first query after an index change computes the length norms
            await timed(query, 5)
        return {"repeated": [await timed(QUERIES[index % len(QUERIES)], 5) for index in range(runs)],
                "new": [await timed(query, 5) for query in fresh], "ranked": [await timed(query, 6) for query in fresh]}

    return anyio.run(measure)


async def main(catalog: Path, copies: int, runs: int, semantic: bool, fresh: list[str]) -> dict[str, Any]:
    """The proxy side, samples in ms: direct and proxied calls (also while tools embed), tool_search."""
    async with Client(stdio_client(_stdio(CATALOG_SERVER, "--tools", "1", "--prefix", "echo"))) as direct:
        direct_ms = await _timed(runs, lambda i: direct.call_tool("echo_0000", {"value": i}))
    embedding_ms: list[float] = []
    embed_s = 0.0
    with tempfile.TemporaryDirectory() as temp:
        _write_config(Path(temp), catalog, copies, semantic)
        params = _stdio("-m", "proxy", "serve", "--config-dir", temp, "--log-level", "warning")
        async with Client(stdio_client(params), mode="legacy") as proxy:
            tools = (await proxy.list_tools()).tools  # waits for the whole fleet (startup_wait)
            count = (tools[0].description or "").split()[1]  # "Search N deferred tools ..."

            def call(i: int) -> Awaitable[object]:
                return proxy.call_tool("tool_call", {"name": "echo__echo_0000", "arguments": {"value": i}})

            if semantic:  # every tool is new to the cache in the temporary config dir: all of them embed now
                started = time.perf_counter()
                embedding_ms = await _calls_while_embedding(call, Path(temp) / ".cache" / "embeddings", int(count))
                embed_s = time.perf_counter() - started
            call_ms = await _timed(runs, call)
            search_ms = await _timed(runs, lambda i: proxy.call_tool(
                "tool_search", {"queries": [QUERIES[i % len(QUERIES)]]}))
            new_ms = []
            for query in fresh:
                started = time.perf_counter()
                await proxy.call_tool("tool_search", {"queries": [query]})
                new_ms.append((time.perf_counter() - started) * 1000)
    return {"direct": direct_ms, "embedding": embedding_ms, "call": call_ms, "search": search_ms, "new": new_ms,
            "count": count, "embed_s": embed_s}


def report(catalog: Path, copies: int, runs: int, semantic: bool) -> None:
    """Run the proxy side in an event loop, then the in-process search (which builds its own catalog)."""
    fresh = [q["query"] for q in json.loads((catalog.parent / "queries-dev.json").read_text())]
    measured = anyio.run(main, catalog, copies, runs, semantic, fresh)
    direct_ms, embedding_ms, call_ms = measured["direct"], measured["embedding"], measured["call"]
    search_ms, new_ms, count = measured["search"], measured["new"], measured["count"]
    in_process = _in_process_ms(catalog, copies, runs, semantic, fresh)
    reference = statistics.median(direct_ms)
    mode = "hybrid (semantic on)" if semantic else "lexical"
    print(f"{count} tools behind the proxy, {runs} runs each, stdio both ways, {mode} search, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(_row("direct call to the upstream", direct_ms, reference))
    if embedding_ms:
        print(_row(f"proxied call while tools embed ({measured['embed_s']:.0f} s)", embedding_ms, reference))
    print(_row("proxied call (tool_call)", call_ms, reference))
    print(_row(f"tool_search over {count} tools", search_ms, reference))
    print(_row("  new queries (queries-dev, each once)", new_ms, reference))
    print(_row("in-process bridge.search, repeated query", in_process["repeated"], reference))
    print(_row("  new query (its vector, then the ranking)", in_process["new"], reference))
    print(_row("  new ranking of a known query vector", in_process["ranked"], reference))
    call = statistics.median(call_ms)
    print(f"search / proxied call: repeated queries {statistics.median(search_ms) / call:.2f}, "
          f"new queries {statistics.median(new_ms) / call:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalogs", type=Path, default=REPO.parent / "shared" / "catalogs")
    parser.add_argument("--copies", type=int, default=12, help="real-fleet copies (12 x 839 tools)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--semantic", action="store_true", help="hybrid search, its embeddings computed cold")
    options = parser.parse_args()
    report(options.catalogs / "real-fleet.json", options.copies, options.runs, options.semantic)
