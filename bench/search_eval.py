"""Search quality benchmark: recall@k, hit@5, MRR and latency, ours vs plain Okapi BM25.

Run: .venv/bin/python -m bench.search_eval [--catalogs DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from proxy.search import SearchDoc, SearchIndex, doc_from_tool, tokenize

REPO_ROOT = Path(__file__).resolve().parent.parent
DATASETS = {
    "real-fleet/dev": ("real-fleet.json", "queries-dev.json"),
    "livemcpbench": ("livemcpbench/catalog.json", "livemcpbench/queries.json"),
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
RECALL_DEFINITION = "recall@k = |gold ∩ top-k| / |gold|, averaged over queries; hit@5 = any gold in top 5"


def catalogs_dir(override: str | None = None) -> Path:
    """--catalogs, then $TOOLBRIDGE_CATALOGS, then ../shared/catalogs beside the repo."""
    if override:
        return Path(override)
    env = os.environ.get("TOOLBRIDGE_CATALOGS")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "catalogs"


def qualified(server: str, tool: str) -> str:
    return _UNSAFE.sub("_", f"{server}__{tool}")


def load_catalog(path: Path) -> dict[str, list[SearchDoc]]:
    """Catalog file -> {server: [SearchDoc]} with toolbridge qualified names."""
    servers = json.loads(path.read_text())["servers"]
    return {
        server: [
            doc_from_tool(qualified(server, t["name"]), server, t["name"], t.get("description"), t.get("inputSchema"))
            for t in body["tools"]
        ]
        for server, body in servers.items()
    }


def load_queries(path: Path) -> list[dict]:
    queries = json.loads(path.read_text())
    for q in queries:
        q["gold"] = [_UNSAFE.sub("_", g) for g in q["gold"]]
    return queries


class PlainBM25:
    """rank-bm25 style Okapi BM25 (k1=1.5, b=0.75, epsilon idf floor) scoring every document."""

    def __init__(self, docs: list[SearchDoc], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self.names = [d.name for d in docs]
        self.tfs = [Counter(tokenize(" ".join((d.raw_name, d.server, d.description, *d.params)))) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avgdl = sum(self.lens) / len(docs)
        self.k1, self.b = k1, b
        df: Counter[str] = Counter(t for tf in self.tfs for t in tf)
        n = len(docs)
        self.idf = {t: math.log(n - f + 0.5) - math.log(f + 0.5) for t, f in df.items()}
        floor = epsilon * sum(self.idf.values()) / len(self.idf)
        self.idf = {t: (v if v >= 0 else floor) for t, v in self.idf.items()}

    def search(self, query: str, *, limit: int) -> list[str]:
        terms = tokenize(query)
        scores = []
        for name, tf, dl in zip(self.names, self.tfs, self.lens, strict=True):
            norm = self.k1 * (1 - self.b + self.b * dl / self.avgdl)
            s = sum(self.idf.get(t, 0.0) * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in terms if t in tf)
            scores.append((s, name))
        ranked = sorted((x for x in scores if x[0] > 0), key=lambda x: (-x[0], x[1]))
        return [name for _, name in ranked[:limit]]


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
    r1 = r5 = r10 = hit5 = mrr = 0.0
    lat: list[float] = []
    for q in queries:
        gold = set(q["gold"])
        t0 = time.perf_counter()
        ranked = search(q["query"])
        lat.append((time.perf_counter() - t0) * 1000)
        r1 += len(gold & set(ranked[:1])) / len(gold)
        r5 += len(gold & set(ranked[:5])) / len(gold)
        r10 += len(gold & set(ranked[:10])) / len(gold)
        hit5 += bool(gold & set(ranked[:5]))
        mrr += next((1 / (i + 1) for i, name in enumerate(ranked) if name in gold), 0.0)
    n = len(queries)
    lat.sort()
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


def run_dataset(root: Path, catalog: str, queries: str) -> dict[str, Report]:
    """Evaluate ours and the plain baseline on one catalog/query pair."""
    servers = load_catalog(root / catalog)
    qs = load_queries(root / queries)
    index = SearchIndex()
    for server, docs in servers.items():
        index.set_server(server, docs)
    plain = PlainBM25([d for docs in servers.values() for d in docs])
    return {
        "plain-bm25": evaluate(lambda q: plain.search(q, limit=10), qs),
        "toolbridge": evaluate(lambda q: index.search(q, limit=10), qs),
    }


def format_table(results: dict[str, dict[str, Report]]) -> str:
    head = f"{'dataset':<16} {'ranker':<11} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'hit@5':>6} {'MRR':>6}"
    lines = [head + "   latency ms mean/p50/p95", "-" * (len(head) + 27)]
    for dataset, by_ranker in results.items():
        for ranker, r in by_ranker.items():
            lines.append(
                f"{dataset:<16} {ranker:<11} {r.recall1:6.3f} {r.recall5:6.3f} {r.recall10:6.3f} "
                f"{r.hit5:6.3f} {r.mrr:6.3f}   {r.lat_mean_ms:.3f}/{r.lat_p50_ms:.3f}/{r.lat_p95_ms:.3f}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--catalogs", help="catalog dir (default $TOOLBRIDGE_CATALOGS or ../shared/catalogs)")
    root = catalogs_dir(parser.parse_args().catalogs)
    results = {name: run_dataset(root, cat, qs) for name, (cat, qs) in DATASETS.items()}
    print(format_table(results))
    print(RECALL_DEFINITION + "; MRR = mean 1/rank of the first gold in the top 10 (0 if none)")


if __name__ == "__main__":
    main()
