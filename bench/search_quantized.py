"""Hybrid search quality and model cost: the semantic extra's MiniLM against the same weights re-quantised
for integer matrix products (bench/minilm_dynamic.py, in .bench-venv/quantize/ from bench/setup_search.sh).

Both models embed the same tool texts and query aspects; each dataset is then ranked exactly as
`bridge.rank` fuses (exact names first, lexical leg, a tool's best cosine over the query's aspects, score
fusion) and scored by recall@5. LiveMCPBench is reported, never chosen on.
Run: .venv/bin/python -m bench.search_quantized [--catalogs DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from bench.search_eval import DATASETS, REPO_ROOT, catalogs_dir, load_catalog, load_queries, queries_path
from proxy.downstream import bridge
from proxy.search import SearchDoc, SearchIndex, fuse, semantic

QUANTIZE_PYTHON = REPO_ROOT / ".bench-venv" / "quantize" / "bin" / "python"


def rank(index: SearchIndex, docs: list[SearchDoc], vectors: np.ndarray, aspect_vectors: np.ndarray,
         query: str) -> list[str]:
    exact = index.exact(query)
    lexical = index.scored(query, limit=bridge.FUSION_DEPTH, exact=exact)
    sims = (vectors @ aspect_vectors.T).max(axis=1)
    top = np.argsort(-sims, kind="stable")[: bridge.FUSION_DEPTH]
    similarity = {docs[i].name: float(sims[i]) for i in top}
    position = {d.name: i for i, d in enumerate(docs)}
    similarity.update({name: float(sims[position[name]]) for name, _ in lexical})
    return (exact + [n for n in fuse(lexical, similarity, 10 + len(exact)) if n not in exact])[:10]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--catalogs", help="catalog dir (default $TOOLBRIDGE_CATALOGS or ../shared/catalogs)")
    root = catalogs_dir(parser.parse_args().catalogs)
    if not QUANTIZE_PYTHON.exists():
        raise SystemExit("run bench/setup_search.sh first (it sets up .bench-venv/quantize/)")
    catalogs = {cat: load_catalog(root / cat) for cat, _ in DATASETS.values()}
    docs = {cat: [d for ds in servers.values() for d in ds] for cat, servers in catalogs.items()}
    sets = {name: load_queries(queries_path(root, name)) for name in DATASETS}
    texts = [semantic.doc_text(d.server, d.raw_name, d.description) for ds in docs.values() for d in ds]
    aspects = sorted({a for qs in sets.values() for q in qs for a in semantic.aspects(q["query"])})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "vectors.npz"
        request = json.dumps({"texts": texts, "queries": aspects, "out": str(out)})
        costs = json.loads(subprocess.run([str(QUANTIZE_PYTHON), str(REPO_ROOT / "bench" / "minilm_dynamic.py")],
                                          input=request, capture_output=True, text=True, check=True).stdout)
        vectors = dict(np.load(out))
    print(f"{len(texts)} tool texts, {len(aspects)} query aspects; model costs (CPU, one thread): {costs}")
    for model in ("shipped", "dynamic"):
        row, start = [], 0
        by_aspect = {a: vectors[f"{model}_queries"][i] for i, a in enumerate(aspects)}
        tool_vectors = {}
        for cat, ds in docs.items():
            tool_vectors[cat] = vectors[f"{model}_texts"][start : start + len(ds)]
            start += len(ds)
        for name, (cat, _) in DATASETS.items():
            index = SearchIndex()
            for server, server_docs in catalogs[cat].items():
                index.set_server(server, server_docs)
            recall = [len(set(q["gold"]) & set(rank(index, docs[cat], tool_vectors[cat], np.stack(
                [by_aspect[a] for a in semantic.aspects(q["query"])]), q["query"])[:5])) / len(q["gold"])
                for q in sets[name]]
            row.append(f"{name} {np.mean(recall):.3f}")
        print(f"hybrid R@5, {model:<8} " + "  ".join(row))


if __name__ == "__main__":
    main()
