"""Search speed at fleet scale: build time and query latency over ~10k tools, ours vs FastMCP's BM25.

The 10k catalog replicates real-fleet servers under new server names. Also times a one-server update.
`--semantic` adds the hybrid `tool_search` over the same 10k tools, its embeddings computed by the
gateway's own background step (cached on disk, so only the first run pays for them): per query, wall and
CPU time of encoding it and ranking, and the wall time of a repeated query (its ranking kept by the view).
Run: .venv/bin/python -m bench.search_speed [--catalogs DIR] [--tools 10000] [--semantic [--cache-dir DIR]]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from bench.search_eval import (
    DEFAULT_CACHE_DIR,
    TASK_QUERIES,
    FastMCPBM25,
    build_catalog,
    catalogs_dir,
    load_catalog,
    load_queries,
    load_servers,
)
from proxy.downstream import bridge
from proxy.search import SearchDoc, SearchIndex
from proxy.views import Views


def replicate(servers: dict[str, list[SearchDoc]], target: int) -> dict[str, list[SearchDoc]]:
    """Copies of every server under fresh labels (`<server>-<n>`) until `target` tools."""
    out: dict[str, list[SearchDoc]] = {}
    total, copy = 0, 0
    while total < target:
        for server, docs in servers.items():
            label = f"{server}-{copy}"
            out[label] = [dataclasses.replace(d, name=f"{label}__{d.raw_name}", server=label) for d in docs]
            total += len(docs)
        copy += 1
    return out


def replicate_tools(servers: dict[str, list[dict]], target: int) -> dict[str, list[dict]]:
    """`replicate` for tools/list entries: the copies a gateway with `target` tools would register."""
    out: dict[str, list[dict]] = {}
    copy = 0
    while sum(map(len, out.values())) < target:
        out.update({f"{server}-{copy}": tools for server, tools in servers.items()})
        copy += 1
    return out


def hybrid_ms(catalog: Views, queries: list[str]) -> tuple[list[float], ...]:
    """Per query, as the gateway answers `tool_search`: `prepare_search` (the model encodes the query in a
    worker thread) then `search`; wall ms, CPU ms, and the wall ms of the same query again, its ranking
    kept by the view. Only the lexical leg's per-term arrays are warm at first."""
    view = catalog.for_profile("default")
    for query in queries:  # warm, as the lexical "warm" row: each query's terms have their arrays joined
        catalog.index.search(query, limit=10, scope=view.deferred)

    async def one(query: str) -> None:
        arguments = {"queries": [query], "limit": 10}
        await bridge.prepare_search(catalog, view, arguments)
        bridge.search(catalog, view, arguments)

    async def run() -> tuple[list[float], ...]:
        first, cpu, again = [], [], []
        for samples in (first, again):
            for query in queries:
                c0, t0 = time.process_time(), time.perf_counter()
                await one(query)
                samples.append((time.perf_counter() - t0) * 1000)
                if samples is first:
                    cpu.append((time.process_time() - c0) * 1000)
        return sorted(first), sorted(cpu), sorted(again)

    return anyio.run(run)


def rss_mb() -> float:
    """This process's resident memory now (Linux)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """This process's largest resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def report_hybrid(root: Path, target: int, cache: Path) -> None:
    servers = replicate_tools(load_servers(root / "real-fleet.json"), target)
    n_tools = sum(map(len, servers.values()))
    before = rss_mb()
    lexical = build_catalog(servers)
    lexical_mb = rss_mb() - before
    del lexical
    before = rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    catalog = build_catalog(servers, cache)
    print(f"hybrid     {n_tools} tools indexed and embedded (cache {cache}) in {time.perf_counter() - t0:.1f} s, "
          f"{time.process_time() - c0:.1f} s CPU; RSS +{rss_mb() - before:.0f} MB (the same catalog lexical only: "
          f"+{lexical_mb:.0f} MB); process RSS {rss_mb():.0f} MB, peak {peak_rss_mb():.0f} MB")
    for name, path in (("queries-dev", root / "queries-dev.json"), ("tasks", TASK_QUERIES)):
        queries = [q["query"] for q in load_queries(path)]
        first, cpu, again = hybrid_ms(catalog, queries)
        print(f"hybrid ms  {name:<11} new query {summary(first)} (CPU {summary(cpu)})   "
              f"repeated {summary(again)}   (load average {os.getloadavg()[0]:.1f})")


def latencies_ms(search: Callable[[str], list[str]], queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        search(q)
        out.append((time.perf_counter() - t0) * 1000)
    return sorted(out)


def summary(lat: list[float]) -> str:
    return f"mean {statistics.fmean(lat):.2f}  p50 {lat[len(lat) // 2]:.2f}  p95 {lat[int(0.95 * len(lat))]:.2f}"


def cold_ms(index: SearchIndex, server: str, docs: list[SearchDoc], queries: list[str]) -> list[float]:
    """Each query timed as the first one after an index change (re-setting one server), when the length
    norms and every term's impacts are recomputed."""
    out = []
    for q in queries:
        index.set_server(server, docs)
        out.extend(latencies_ms(lambda q: index.search(q, limit=10), [q]))
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--catalogs", help="catalog dir (default $TOOLBRIDGE_CATALOGS or bench/catalogs)")
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--semantic", action="store_true", help="also time the hybrid tool_search")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help="embedding cache for --semantic")
    args = parser.parse_args()
    root = catalogs_dir(args.catalogs)
    servers = replicate(load_catalog(root / "real-fleet.json"), args.tools)
    queries = [q["query"] for q in load_queries(root / "queries-dev.json")]
    n_tools = sum(map(len, servers.values()))

    t0 = time.perf_counter()
    index = SearchIndex()
    for server, docs in servers.items():
        index.set_server(server, docs)
    build_s = time.perf_counter() - t0
    index.search("warm up", limit=10)

    first = next(iter(servers))
    t0 = time.perf_counter()
    index.set_server(first, servers[first])
    update_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    index.search("create issue", limit=10)  # recomputes the lazy length norms after the update
    first_query_ms = (time.perf_counter() - t0) * 1000

    t0 = time.perf_counter()
    plain = FastMCPBM25([(d.name, " ".join((d.name, d.description, *d.params, *d.param_text)))
                         for docs in servers.values() for d in docs])
    plain_build_s = time.perf_counter() - t0

    cold = cold_ms(index, first, servers[first], queries)
    latencies_ms(lambda q: index.search(q, limit=10), queries)  # every query's terms cached: warm from here
    warm = latencies_ms(lambda q: index.search(q, limit=10), queries)
    scoped = frozenset(d.name for docs in servers.values() for d in docs[::10])  # a session view's ~10% scope
    warm_scoped = latencies_ms(lambda q: index.search(q, limit=10, scope=scoped), queries)
    base = latencies_ms(lambda q: plain.search(q, limit=10), queries)
    print(f"{n_tools} tools on {len(servers)} servers, {len(queries)} queries (queries-dev), limit 10")
    print(f"build      toolbridge {build_s:.2f} s   fastmcp-bm25 {plain_build_s:.2f} s")
    print(
        f"update     toolbridge set_server({first!r}, {len(servers[first])} tools) {update_ms:.1f} ms; "
        f"first query after it {first_query_ms:.1f} ms"
    )
    print(f"query ms   toolbridge cold          {summary(cold)}   (first query after an update)")
    print(f"query ms   toolbridge warm          {summary(warm)}")
    print(f"query ms   toolbridge warm 10% scope {summary(warm_scoped)}")
    print(f"query ms   fastmcp-bm25              {summary(base)}")
    if args.semantic:
        report_hybrid(root, args.tools, args.cache_dir)


if __name__ == "__main__":
    main()
