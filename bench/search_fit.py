"""Fitting the lexical ranking's parameters, and k-fold cross-validation of that fitting (issue 16).

The tuning queries are the development set, the argument-bearing set (bench/queries/args.json) and the
multi-step task requests (bench/queries/tasks.json), all over the real fleet; LiveMCPBench is never tuned
on. `cross_validate` splits the tuning queries into k folds (each set spread over all folds), fits on k-1
and scores the held-out fold, so its figures say
what the fitting procedure earns on queries it never saw; `fit` on all of them gives the shipped
`proxy.search.RANKING`. The fit is coordinate ascent over a small grid per parameter, objective mean
recall@5 plus a little MRR to break ties. The fused (hybrid) ranking's two parameters, the lexical leg's
clause balance and the lexical share, are fitted together over a grid by `fit_fusion` and cross-validated
by `cross_validate_fusion` (bench/search_eval.py --semantic).
Run: .venv/bin/python -m bench.search_fit [--catalogs DIR]  (prints the CV figures and the full fit)
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from collections.abc import Callable, Sequence

from proxy.search import FIELDS, RANKING, Ranking, SearchIndex

GRID: dict[str, tuple[float, ...]] = {
    "weights": (0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0),
    "b": (0.0, 0.3, 0.5, 0.75, 0.9),  # b = 1 would divide by an empty field's zero length
    "k1": (0.8, 1.2, 2.0, 3.0),
    "synonyms": (0.0, 0.15, 0.3, 0.5),
    "name_coverage": (0.0, 0.25, 0.5, 1.0),
}
SWEEPS = 2
# What the shipped procedure fits: the parameter-text field's weight. Fitting every coordinate (ALL) scored
# lower cross-validated and on LiveMCPBench than the earlier defaults, so the others stay as they are.
FITTED = ("weights[5]",)
ALL = (*(f"{name}[{f}]" for f in range(len(FIELDS)) for name in ("weights", "b")), "k1", "synonyms", "name_coverage")
FOLDS = 5
SEED = 16


def recall5_mrr(search: Callable[[str], list[str]], queries: Sequence[dict]) -> tuple[float, float]:
    """Mean recall@5 and MRR@10 of one ranking function."""
    r5 = mrr = 0.0
    for q in queries:
        ranked, gold = search(q["query"]), set(q["gold"])
        r5 += len(gold & set(ranked[:5])) / len(gold)
        mrr += next((1 / (i + 1) for i, name in enumerate(ranked) if name in gold), 0.0)
    return r5 / len(queries), mrr / len(queries)


def _objective(index: SearchIndex, ranking: Ranking, queries: Sequence[dict]) -> float:
    index.retune(ranking)
    r5, mrr = recall5_mrr(lambda q: index.search(q, limit=10), queries)
    return r5 + 0.1 * mrr


def _moves(ranking: Ranking, coordinate: str) -> list[Ranking]:
    """The rankings that differ from `ranking` in one coordinate ("k1", "weights[2]") only."""
    name, _, field = coordinate.rstrip("]").partition("[")
    if not field:
        return [dataclasses.replace(ranking, **{name: v}) for v in GRID[name] if v != getattr(ranking, name)]
    f, current = int(field), getattr(ranking, name)
    return [dataclasses.replace(ranking, **{name: (*current[:f], v, *current[f + 1 :])})
            for v in GRID[name] if v != current[f]]


def fit(index: SearchIndex, queries: Sequence[dict], free: Sequence[str] = FITTED, start: Ranking = RANKING) -> Ranking:
    """Coordinate ascent over the `free` coordinates from `start`: each one's best grid value while it improves."""
    best, best_score = start, _objective(index, start, queries)
    for _ in range(SWEEPS):
        improved = False
        for coordinate in free:
            candidates = _moves(best, coordinate)
            for ranking in candidates:
                score = _objective(index, ranking, queries)
                if score > best_score + 1e-9:
                    best, best_score, improved = ranking, score, True
        if not improved:
            break
    index.retune(RANKING)
    return best


def folds(sets: dict[str, list[dict]], k: int = FOLDS) -> list[list[dict]]:
    """k folds over every set's queries, each set shuffled (fixed seed) and dealt round-robin."""
    out: list[list[dict]] = [[] for _ in range(k)]
    for name in sorted(sets):
        shuffled = list(sets[name])
        random.Random(SEED).shuffle(shuffled)
        for i, q in enumerate(shuffled):
            out[i % k].append(q)
    return out


def cross_validate(
    index: SearchIndex, sets: dict[str, list[dict]], free: Sequence[str] = FITTED, k: int = FOLDS
) -> dict[str, dict[str, list[str]]]:
    """Held-out rankings (top 10) per set and query id: each fold ranked with parameters fitted on the others."""
    parts = folds(sets, k)
    held: dict[str, list[str]] = {}
    for i, part in enumerate(parts):
        ranking = fit(index, [q for j, other in enumerate(parts) if j != i for q in other], free)
        index.retune(ranking)
        held.update({q["id"]: index.search(q["query"], limit=10) for q in part})
        index.retune(RANKING)
    return {name: {q["id"]: held[q["id"]] for q in queries} for name, queries in sets.items()}


FUSION_GRID = tuple(i / 20 for i in range(21))  # the lexical share in score fusion
CLAUSE_GRID = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)  # the fused lexical leg's `Ranking.clause_balance`
RRF_K = 60
Legs = tuple[list[tuple[str, float]], dict[str, float]]  # lexical (name, score) list, candidates' cosines


def rrf(lexical: Sequence[str], dense: Sequence[str], limit: int) -> list[str]:
    """Reciprocal-rank fusion (k 60), the baseline score fusion replaced."""
    scores: dict[str, float] = {}
    for ranking in (lexical, dense):
        for rank, name in enumerate(ranking):
            scores[name] = scores.get(name, 0.0) + 1 / (RRF_K + rank + 1)
    return sorted(scores, key=lambda n: (-scores[n], n))[:limit]


def fit_fusion(legs: dict[float, dict[str, Legs]], queries: Sequence[dict]) -> tuple[float, float]:
    """The (clause balance, lexical share) pair of the grids that ranks `queries` best.
    `legs` holds per clause balance of CLAUSE_GRID, per query id, what `fuse` fuses."""
    from proxy.search import fuse

    def objective(pair: tuple[float, float]) -> float:
        balance, weight = pair
        by_text = {q["query"]: fuse(*legs[balance][q["id"]], 10, weight) for q in queries}
        r5, mrr = recall5_mrr(by_text.__getitem__, queries)
        return r5 + 0.1 * mrr

    return max(((b, w) for b in CLAUSE_GRID for w in FUSION_GRID), key=objective)


def cross_validate_fusion(
    legs: dict[float, dict[str, Legs]], sets: dict[str, list[dict]], k: int = FOLDS
) -> tuple[dict[str, list[str]], list[tuple[float, float]]]:
    """Held-out fused rankings per query id, the clause balance and lexical share fitted on the other folds;
    and each fold's pair."""
    from proxy.search import fuse

    parts, held, pairs = folds(sets, k), {}, []
    for i, part in enumerate(parts):
        balance, weight = fit_fusion(legs, [q for j, other in enumerate(parts) if j != i for q in other])
        pairs.append((balance, weight))
        held.update({q["id"]: fuse(*legs[balance][q["id"]], 10, weight) for q in part})
    return held, pairs


def main() -> None:
    from bench.search_eval import TUNING, catalogs_dir, load_catalog, load_queries, queries_path

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--catalogs", help="catalog dir (default $TOOLBRIDGE_CATALOGS or bench/catalogs)")
    parser.add_argument("--all", action="store_true", help="fit every coordinate, not only FITTED")
    args = parser.parse_args()
    free = ALL if args.all else FITTED
    root = catalogs_dir(args.catalogs)
    index = SearchIndex()
    for server, docs in load_catalog(root / "real-fleet.json").items():
        index.set_server(server, docs)
    sets = {name: load_queries(queries_path(root, name)) for name in TUNING}
    held = cross_validate(index, sets, free)
    for name, queries in sets.items():
        by_query = {q["query"]: held[name][q["id"]] for q in queries}
        r5, mrr = recall5_mrr(by_query.__getitem__, queries)
        print(f"{name}: cross-validated R@5 {r5:.3f} MRR {mrr:.3f}")
    print("fitted on all tuning queries:", fit(index, [q for qs in sets.values() for q in qs], free))


if __name__ == "__main__":
    main()
