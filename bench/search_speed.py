"""Search speed at fleet scale: build time and query latency over ~10k tools, ours vs FastMCP's BM25.

The 10k catalog replicates real-fleet servers under new server names. Also times a one-server update.
Run: .venv/bin/python -m bench.search_speed [--catalogs DIR] [--tools 10000]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable

from bench.search_eval import FastMCPBM25, catalogs_dir, load_catalog, load_queries
from proxy.search import SearchDoc, SearchIndex


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
    parser.add_argument("--catalogs", help="catalog dir (default $TOOLBRIDGE_CATALOGS or ../shared/catalogs)")
    parser.add_argument("--tools", type=int, default=10_000)
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


if __name__ == "__main__":
    main()
