"""Search quality benchmark: recall@k, hit@5, MRR and latency, `tool_search` vs plain Okapi BM25.

Queries go through `proxy.bridge.search`, the code behind the `tool_search` bridge tool, over a registry
and catalog built the way the server builds them. `--e2e` serves each catalog server as a real upstream
process and asks a real `toolbridge serve` over stdio; its figures must equal the in-process ones.
`--semantic` adds a `hybrid` row: the same `tool_search` with `tool_search.semantic: on`, its embeddings
computed by the gateway's own background step and cached on disk (reused by later runs).
Run: .venv/bin/python -m bench.search_eval [--catalogs DIR] [--e2e] [--semantic [--cache-dir DIR]]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters, stdio_client, types

from bench.search_fit import CLAUSE_GRID, FOLDS, Legs, cross_validate, cross_validate_fusion, fit_fusion, rrf
from proxy.app import embed_pending
from proxy.config import ToolSearchSettings, ToolsetsConfig
from proxy.downstream import bridge
from proxy.registry import Registry
from proxy.search import RANKING, SearchDoc, SearchIndex, doc_from_tool, semantic, tokenize
from proxy.views import Views

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE_DIR = REPO_ROOT / ".cache" / "embeddings"
CATALOG_SERVER = REPO_ROOT / "tests" / "servers" / "catalog_server.py"
ARGS_QUERIES = REPO_ROOT / "bench" / "queries" / "args.json"  # ours: single-step requests naming argument values
# ours (issue 23): imperative requests carrying argument values, written before any ranking was measured on
# them and split by a hash of the id; the ranking may be tuned on "tune", "lockbox" is scored once, at the end.
VALUES_QUERIES = REPO_ROOT / "bench" / "queries" / "values.json"
TASK_QUERIES = REPO_ROOT / "bench" / "queries" / "tasks.json"  # ours: multi-step task requests, 2-6 gold tools
DATASETS = {
    "real-fleet/dev": ("real-fleet.json", "queries-dev.json"),
    "real-fleet/args": ("real-fleet.json", str(ARGS_QUERIES)),
    "real-fleet/tasks": ("real-fleet.json", str(TASK_QUERIES)),
    "livemcpbench": ("livemcpbench/catalog.json", "livemcpbench/queries.json"),
    "values/tune": ("real-fleet.json", f"{VALUES_QUERIES}#tune"),
    "values/lockbox": ("real-fleet.json", f"{VALUES_QUERIES}#lockbox"),
}
# Public sets rebuilt by `bench.public_sets` from named public snapshots (never committed); held out: never tuned on.
PUBLIC_SETS = REPO_ROOT / ".bench-data"
DATASETS |= {f"{source}/{name}": (str(PUBLIC_SETS / source / name / "catalog.json"),
                                  str(PUBLIC_SETS / source / name / "queries.json"))
             for source, names in (("bfcl", ("ast", "live")), ("metatool", ("single", "multi")),
                                 ("mcpbench", ("single", "multi")))
             for name in names if (PUBLIC_SETS / source / name).is_dir()}
# What parameters are fitted on; LiveMCPBench never is.
TUNING = ("real-fleet/dev", "real-fleet/args", "real-fleet/tasks")
FASTMCP_PYTHON = REPO_ROOT / ".search-bench-venv" / "bin" / "python"  # bench/setup_search.sh
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
RECALL_DEFINITION = "recall@k = |gold ∩ top-k| / |gold|, averaged over queries; hit@5 = any gold in top 5"


def catalogs_dir(override: str | None = None) -> Path:
    """--catalogs, then $TOOLBRIDGE_CATALOGS, then bench/catalogs in the repo."""
    if override:
        return Path(override)
    env = os.environ.get("TOOLBRIDGE_CATALOGS")
    return Path(env) if env else REPO_ROOT / "bench" / "catalogs"


def queries_path(root: Path, dataset: str) -> Path:
    return root / DATASETS[dataset][1]  # an absolute path (ours) stays as it is


def qualified(server: str, tool: str) -> str:
    return _UNSAFE.sub("_", f"{server}__{tool}")


def load_catalog(path: Path) -> dict[str, list[SearchDoc]]:
    """Views file -> {server: [SearchDoc]} with toolbridge qualified names."""
    servers = json.loads(path.read_text())["servers"]
    return {
        server: [
            doc_from_tool(qualified(server, t["name"]), server, t["name"], t.get("description"), t.get("inputSchema"))
            for t in body["tools"]
        ]
        for server, body in servers.items()
    }


def load_servers(path: Path) -> dict[str, list[dict]]:
    """Views file -> {server: [tools/list entries as the server sent them]}."""
    return {server: body["tools"] for server, body in json.loads(path.read_text())["servers"].items()}


def label(server: str) -> str:
    """The upstream label toolbridge would be configured with for a catalog server."""
    return _UNSAFE.sub("_", server)


def build_catalog(servers: dict[str, list[dict]], semantic_cache: Path | None = None) -> Views:
    """Register every server's tools and index them through the catalog's listener, as the server does.

    With `semantic_cache`, semantic search is on and every embedding is in place before this returns.

    Raises:
        SystemExit: semantic search was asked for but its extra is not installed.
    """
    registry = Registry()
    settings = ToolSearchSettings(semantic="on" if semantic_cache else "off")
    catalog = Views(registry, ToolsetsConfig(tool_search=settings), lambda server: True, cache_dir=semantic_cache)
    for server, tools in servers.items():
        registry.set_server_tools(label(server), [types.Tool.model_validate(t) for t in tools])
    if semantic_cache:
        if catalog.semantic is None:
            raise SystemExit("--semantic needs the semantic extra (see pyproject.toml)")
        anyio.run(embed_pending, catalog.semantic)
    return catalog


def tool_search(catalog: Views) -> Callable[[str], list[str]]:
    """One query through `tool_search` (the bridge's search) in the default profile, top 10."""
    view = catalog.for_profile("default")

    def run(query: str) -> list[str]:
        return bridge.search(catalog, view, {"queries": [query], "limit": 10})["results"][0]["matches"]

    return run


def missing_gold(catalog: Views, queries: list[dict]) -> set[str]:
    """Gold ids with no registered tool of that qualified name (should be empty)."""
    return {g for q in queries for g in q["gold"] if catalog.registry.get(g) is None}


def load_queries(path: Path) -> list[dict]:
    """A query set; `file.json#part` keeps the queries of that part only."""
    path, _, part = str(path).partition("#")
    queries = [q for q in json.loads(Path(path).read_text()) if not part or q.get("part") == part]
    for q in queries:
        q["gold"] = [_UNSAFE.sub("_", g) for g in q["gold"]]
    return queries


def fastmcp_text(name: str, tool: dict) -> str:
    """FastMCP's searchable text: name, description, each parameter's name and description."""
    parts = [name, tool.get("description") or ""]
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    for param, spec in props.items():
        parts.append(param)
        if isinstance(spec, dict) and spec.get("description"):
            parts.append(spec["description"])
    return " ".join(p for p in parts if p)


def _fastmcp_tokens(text: str) -> list[str]:
    return re.findall(r"[^\W_]{2,}", unicodedata.normalize("NFKC", text).casefold())


def _plain_tokens(text: str) -> list[str]:
    return tokenize(text)


class FastMCPBM25:
    """FastMCP 4.1.6's `BM25SearchTransform` ranking re-stated: Okapi BM25 (k1 1.5, b 0.75, idf
    log(1 + (N - df + .5) / (df + .5))), no stemming, over `fastmcp_text`; ties keep catalog order.
    `fastmcp_rankings` checks it against FastMCP itself where bench/setup_search.sh installed it."""

    tokens = staticmethod(_fastmcp_tokens)

    def __init__(self, docs: list[tuple[str, str]], k1: float = 1.5, b: float = 0.75):
        """`docs`: (qualified name, `fastmcp_text`) per tool, in catalog order."""
        self.names = [name for name, _ in docs]
        texts = [text for _, text in docs]
        self.tfs = [Counter(self.tokens(text)) for text in texts]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avgdl = sum(self.lens) / len(self.lens)
        self.k1, self.b = k1, b
        self.df: Counter[str] = Counter(t for tf in self.tfs for t in tf)

    def search(self, query: str, *, limit: int) -> list[str]:
        n, scores = len(self.names), [0.0] * len(self.names)
        for token in self.tokens(query):
            if token not in self.df:
                continue
            idf = math.log((n - self.df[token] + 0.5) / (self.df[token] + 0.5) + 1.0)
            for i, tf in enumerate(self.tfs):
                if f := tf.get(token, 0):
                    norm = self.k1 * (1 - self.b + self.b * self.lens[i] / self.avgdl)
                    scores[i] += idf * f * (self.k1 + 1) / (f + norm)
        ranked = sorted(range(n), key=lambda i: scores[i], reverse=True)
        return [self.names[i] for i in ranked[:limit] if scores[i] > 0]


class PlainBM25(FastMCPBM25):
    """Textbook Okapi BM25 (k1 1.2, b 0.75) over the same text, with toolbridge's own words (camelCase and
    `_ . -` split, Porter stemming): what the ranking adds beyond tokenising is measured against this."""

    tokens = staticmethod(_plain_tokens)

    def __init__(self, docs: list[tuple[str, str]]):
        super().__init__(docs, k1=1.2, b=0.75)


def fastmcp_rankings(catalog: Path, queries: list[str]) -> list[list[str]] | None:
    """Top 10 per query from FastMCP's own index in its own venv; None when that venv is not set up."""
    if not FASTMCP_PYTHON.exists():
        return None
    request = json.dumps({"catalog": str(catalog), "queries": queries, "limit": 10})
    script = str(REPO_ROOT / "bench" / "fastmcp_bm25.py")
    answer = subprocess.run([str(FASTMCP_PYTHON), script], input=request, capture_output=True, text=True, check=True)
    return json.loads(answer.stdout)


@dataclass
class Report:
    recall1: float
    recall5: float
    recall10: float
    hit5: float
    mrr: float
    lat_mean_ms: float
    lat_p50_ms: float
    lat_p95_ms: float


def evaluate(search: Callable[[str], list[str]], queries: list[dict]) -> Report:
    """Score one search function over a query set (each query asked for its top 10)."""
    rankings: list[list[str]] = []
    lat: list[float] = []
    for q in queries:
        t0 = time.perf_counter()
        rankings.append(search(q["query"]))
        lat.append((time.perf_counter() - t0) * 1000)
    return score(queries, rankings, lat)


def score(queries: list[dict], rankings: list[list[str]], lat: list[float]) -> Report:
    """Recall@1/5/10, hit@5, MRR and latency of one ranking per query."""
    r1 = r5 = r10 = hit5 = mrr = 0.0
    for q, ranked in zip(queries, rankings, strict=True):
        gold = set(q["gold"])
        r1 += len(gold & set(ranked[:1])) / len(gold)
        r5 += len(gold & set(ranked[:5])) / len(gold)
        r10 += len(gold & set(ranked[:10])) / len(gold)
        hit5 += bool(gold & set(ranked[:5]))
        mrr += next((1 / (i + 1) for i, name in enumerate(ranked) if name in gold), 0.0)
    n = len(queries)
    lat = sorted(lat)
    return Report(
        r1 / n,
        r5 / n,
        r10 / n,
        hit5 / n,
        mrr / n,
        statistics.fmean(lat),
        lat[len(lat) // 2],
        lat[min(n - 1, int(0.95 * n))],
    )


def run_dataset(root: Path, catalog: str, queries: str, semantic_cache: Path | None = None) -> dict[str, Report]:
    """Evaluate `tool_search` and the plain baseline on one catalog/query pair; `hybrid` too with a cache."""
    servers = load_servers(root / catalog)
    qs = load_queries(root / queries)
    tb = build_catalog(servers)
    missing = missing_gold(tb, qs)
    if missing:
        raise SystemExit(f"{catalog}: gold ids not registered: {sorted(missing)}")
    docs = [(qualified(s, t["name"]), fastmcp_text(qualified(s, t["name"]), t)) for s, tools in servers.items()
            for t in tools]
    fastmcp, plain = FastMCPBM25(docs), PlainBM25(docs)
    results = {
        "bm25-plain": evaluate(lambda q: plain.search(q, limit=10), qs),
        "fastmcp-bm25": evaluate(lambda q: fastmcp.search(q, limit=10), qs),
        "tool_search": evaluate(tool_search(tb), qs),
    }
    real = fastmcp_rankings(root / catalog, [q["query"] for q in qs])
    if real is not None and real != [fastmcp.search(q["query"], limit=10) for q in qs]:
        raise SystemExit(f"{catalog}: FastMCP's own BM25 ranks differently from FastMCPBM25")
    if semantic_cache:
        results.update(run_hybrid(root, catalog, queries, semantic_cache))
    return results


def run_hybrid(root: Path, catalog: str, queries: str, semantic_cache: Path) -> dict[str, Report]:
    """`tool_search` with semantic search on (`hybrid`), and the same legs fused by reciprocal rank."""
    servers = load_servers(root / catalog)
    qs = load_queries(root / queries)
    t0, cpu0 = time.perf_counter(), time.process_time()
    hybrid = build_catalog(servers, semantic_cache)
    print(f"{catalog}: {len(hybrid.registry.tools)} tools indexed and embedded in {time.perf_counter() - t0:.1f} s "
          f"({time.process_time() - cpu0:.1f} s CPU, load average {os.getloadavg()[0]:.1f})")
    report = evaluate(tool_search(hybrid), qs)  # first, so each query's latency includes encoding it
    legs = {q["id"]: fusion_legs(hybrid, q["query"]) for q in qs}
    rrf_rankings = [rrf([n for n, _ in lexical], sorted(sims, key=lambda n: -sims[n]), 10)
                    for lexical, sims in map(legs.__getitem__, (q["id"] for q in qs))]
    return {"hybrid": report, "hybrid RRF": score(qs, rrf_rankings, [0.0] * len(qs))}


def fusion_legs(catalog: Views, query: str) -> Legs:
    """What `bridge.rank` fuses for one query: lexical (name, score) candidates and cosine similarities."""
    scope = catalog.for_profile("default").deferred
    semantic = catalog.semantic
    assert semantic is not None
    lexical = catalog.index.scored(query, limit=bridge.FUSION_DEPTH, scope=scope)
    similarity = dict(semantic.rank(query, bridge.FUSION_DEPTH, scope, also=[name for name, _ in lexical]))
    return lexical, similarity


def hybrid_cross_validated(root: Path, cache: Path) -> dict[str, Report]:
    """Score fusion on each tuning set's held-out folds, its clause balance and lexical share fitted on the
    other folds."""
    catalog = build_catalog(load_servers(root / "real-fleet.json"), cache)
    sets = {name: load_queries(queries_path(root, name)) for name in TUNING}
    legs: dict[float, dict[str, Legs]] = {}
    for balance in CLAUSE_GRID:
        catalog.index.retune(dataclasses.replace(RANKING, clause_balance=balance))
        legs[balance] = {q["id"]: fusion_legs(catalog, q["query"]) for qs in sets.values() for q in qs}
    catalog.index.retune(RANKING)
    held, pairs = cross_validate_fusion(legs, sets)
    shipped = (RANKING.clause_balance, semantic.LEXICAL_WEIGHT)
    print(f"hybrid CV: (clause balance, lexical share) fitted per fold {pairs}; on all tuning queries "
          f"{fit_fusion(legs, [q for qs in sets.values() for q in qs])}, shipped {shipped}")
    return {name: score(qs, [held[q["id"]] for q in qs], [0.0] * len(qs)) for name, qs in sets.items()}


def cross_validated(root: Path) -> dict[str, Report]:
    """`tool_search`'s lexical ranking on each tuning set's held-out folds (latency is not measured)."""
    index = SearchIndex()
    for server, docs in load_catalog(root / "real-fleet.json").items():
        index.set_server(server, docs)
    sets = {name: load_queries(queries_path(root, name)) for name in TUNING}
    held = cross_validate(index, sets)
    return {name: score(qs, [held[name][q["id"]] for q in qs], [0.0] * len(qs)) for name, qs in sets.items()}


def format_table(results: dict[str, dict[str, Report]]) -> str:
    head = f"{'dataset':<16} {'ranker':<15} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'hit@5':>6} {'MRR':>6}"
    lines = [head + "   latency ms mean/p50/p95", "-" * (len(head) + 27)]
    for dataset, by_ranker in results.items():
        for ranker, r in by_ranker.items():
            lines.append(
                f"{dataset:<16} {ranker:<15} {r.recall1:6.3f} {r.recall5:6.3f} {r.recall10:6.3f} "
                f"{r.hit5:6.3f} {r.mrr:6.3f}   {r.lat_mean_ms:.3f}/{r.lat_p50_ms:.3f}/{r.lat_p95_ms:.3f}"
            )
    return "\n".join(lines)


def write_config(directory: Path, catalog: Path, servers: Iterable[str]) -> Path:
    """A toolbridge config dir whose upstreams serve each catalog server (tests/servers/catalog_server.py)."""
    (directory / "upstreams").mkdir(parents=True)
    for server in servers:
        spec = {"command": sys.executable, "args": [str(CATALOG_SERVER), "--catalog", str(catalog), "--server", server]}
        (directory / "upstreams" / f"{label(server)}.yaml").write_text(json.dumps(spec))  # JSON is YAML
    (directory / "toolsets.yaml").write_text(json.dumps({"startup_wait": 60}))
    return directory


async def e2e_rankings(config: Path, queries: list[dict]) -> tuple[list[list[str]], list[float], int]:
    """Each query through `tool_search` of a real `toolbridge serve` over stdio: rankings, ms, tools searched."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "proxy", "serve", "--config-dir", str(config)],
        env={**os.environ, "TOOLBRIDGE_LOG_LEVEL": "warning"},
        cwd=str(REPO_ROOT),
    )
    rankings: list[list[str]] = []
    lat: list[float] = []
    total = 0
    async with Client(stdio_client(params), mode="legacy") as client:
        await client.list_tools()  # waits up to startup_wait for the whole fleet
        for q in queries:
            t0 = time.perf_counter()
            result = await client.call_tool("tool_search", {"queries": [q["query"]], "limit": 10})
            lat.append((time.perf_counter() - t0) * 1000)
            content = result.content[0]
            assert isinstance(content, types.TextContent) and not result.is_error, result
            answer = json.loads(content.text)
            rankings.append(answer["results"][0]["matches"])
            total = answer["total_available"]
    return rankings, lat, total


def run_e2e(root: Path, catalog: str, queries: str) -> dict[str, Report]:
    """`tool_search` of a served fleet (one upstream process per catalog server), beside the in-process run.

    Raises:
        SystemExit: the served fleet searched other tools, or ranked any query differently.
    """
    servers = load_servers(root / catalog)
    qs = load_queries(root / queries)
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(Path(tmp) / "config", (root / catalog).resolve(), servers)
        rankings, lat, total = anyio.run(e2e_rankings, config, qs)
    expected = sum(map(len, servers.values()))
    if total != expected:
        raise SystemExit(f"{catalog}: served fleet searched {total} tools, catalog has {expected}")
    search = tool_search(build_catalog(servers))
    differ = [q["id"] for q, ranked in zip(qs, rankings, strict=True) if search(q["query"]) != ranked]
    if differ:
        raise SystemExit(f"{catalog}: served rankings differ from in-process for {differ}")
    return {"tool_search": evaluate(search, qs), "e2e-stdio": score(qs, rankings, lat)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--catalogs", help="catalog dir (default $TOOLBRIDGE_CATALOGS or bench/catalogs)")
    parser.add_argument("--e2e", action="store_true", help="also search a served real-fleet over stdio")
    parser.add_argument("--e2e-all", action="store_true", help="--e2e on every dataset (LiveMCPBench too)")
    parser.add_argument("--semantic", action="store_true", help="add the hybrid (semantic on) tool_search row")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help="embedding cache for --semantic")
    parser.add_argument("--sets", nargs="+", choices=DATASETS, default=list(DATASETS), help="the sets to score")
    parser.add_argument("--no-cv", action="store_true", help="skip the cross-validated rows")
    args = parser.parse_args()
    root = catalogs_dir(args.catalogs)
    cache = args.cache_dir if args.semantic else None
    results = {name: run_dataset(root, *DATASETS[name], cache) for name in args.sets}
    if args.no_cv:
        print(format_table(results))
        return
    for name, report in cross_validated(root).items():
        results[name]["tool_search CV"] = report
    if cache:
        for name, report in hybrid_cross_validated(root, cache).items():
            results.setdefault(name, {})["hybrid CV"] = report
    print(format_table(results))
    print(f"CV: {FOLDS}-fold cross-validation over {' + '.join(TUNING)}: each fold ranked by parameters fitted on "
          "the other folds (bench/search_fit.py); LiveMCPBench is never fitted on")
    print(RECALL_DEFINITION + "; MRR = mean 1/rank of the first gold in the top 10 (0 if none)")
    if args.e2e or args.e2e_all:
        chosen = DATASETS if args.e2e_all else {k: v for k, v in DATASETS.items() if k == "real-fleet/dev"}
        e2e = {name: run_e2e(root, cat, qs) for name, (cat, qs) in chosen.items()}
        print("\nend to end: toolbridge serve over stdio, one upstream process per catalog server")
        print(format_table(e2e))
        print("every query ranked exactly as in-process: yes")


if __name__ == "__main__":
    main()
