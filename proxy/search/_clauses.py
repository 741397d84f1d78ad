"""A long request's clauses: balanced in the fused ranking's lexical leg, covered step by step in the lexical one.

A task request names several steps ("start a workbook plan.xlsx, write the targets into A1:M2 and add a pivot
table"). Ranked on its words alone, its longest step fills the top five with that step's variants (add, create,
delete pivot table) and a short step's tool falls out. The fused leg weighs each clause's words by the clause's
length (`balance_clauses`); the lexical ranking re-ranks its candidates so that each step is answered
(`diversify`): balancing its words there lowered every public set (docs/search.md, issue 30, fourth part).
"""

from __future__ import annotations

import numpy as np

from proxy.search._stemming import content_words, tokenize
from proxy.text import split_clauses

BALANCE_MIN_WORDS = 6  # content words a request needs before its clauses are balanced
# A request is taken as steps as the semantic leg takes its aspects (`_semantic.aspects`): ten content words or
# more, and each clause of two or more is a step, the first `MAX_STEPS` of them (each step is one more ranking, so a
# request of thousands of clauses costs at most 16).
STEP_MIN_WORDS = 10
STEP_CLAUSE_WORDS = 2
MAX_STEPS = 15


def balance_clauses(terms: dict[str, float], query: str, balance: float) -> dict[str, float]:
    """`terms` of a request of several clauses with each clause word's weight scaled by n ** -balance, n the
    content words of the shortest clause it occurs in, relative to the request's shortest clause: a step
    named in two words ("then merge it") then counts as much as one described in ten, so the tool for each
    step can reach the top five. Other terms (joined compounds, prefix completions, synonyms) keep theirs."""
    if not balance or content_words(query) < BALANCE_MIN_WORDS:
        return terms
    factors: dict[str, float] = {}
    for clause in split_clauses(query):
        stems = set(tokenize(clause, drop_stop_words=True))
        for term in stems:
            factors[term] = max(factors.get(term, 0.0), len(stems) ** -balance)
    top = max(factors.values(), default=1.0)
    return {term: weight * factors.get(term, top) / top for term, weight in terms.items()}


def steps_of(query: str) -> list[str]:
    """The clauses of a long request that can name a step (`STEP_MIN_WORDS`, `STEP_CLAUSE_WORDS`, `MAX_STEPS`)."""
    if content_words(query) < STEP_MIN_WORDS:
        return []
    return [clause for clause in split_clauses(query) if content_words(clause) >= STEP_CLAUSE_WORDS][:MAX_STEPS]


def diversify(
    whole: list[tuple[str, float]], steps: list[tuple[float, dict[str, float]]], limit: int, share: float,
    depth: int,
) -> list[tuple[str, float]]:
    """`whole` (the request's ranking, best first, with scores) re-ranked so that each step is answered (xQuAD):
    each next tool maximizes (1 - share) x its score for the request + share x the sum over `steps` (each a weight
    and its tools' scores) of the step's weight share x the tool's score for the step x how little the tools
    already chosen answer that step, every score relative to its ranking's best. The candidates are the first
    `depth` of `whole` and every step's tools, whatever `limit`, so a shorter ranking is the start of a longer one;
    past them `whole` goes on in its order. Scores stay on the request's scale: a tool's gain x the best score."""
    if not whole or not steps:
        return whole[:limit]
    top = whole[0][1]
    scores = dict(whole[:depth])
    answered = [{name: s / max(ranked.values()) for name, s in ranked.items()} for _, ranked in steps]
    pool = sorted({name for name, _ in whole[:depth]}.union(*answered))
    relevance = np.array([scores.get(name, 0.0) / top for name in pool])
    answers = np.array([[ranked.get(name, 0.0) for name in pool] for ranked in answered])
    weights = np.array([weight for weight, _ in steps])
    weights /= max(weights.sum(), 1e-12)
    unanswered = np.ones(len(steps))
    open_ = np.ones(len(pool), dtype=bool)
    chosen: list[tuple[str, float]] = []
    for _ in range(min(limit, len(pool))):
        gains = (1 - share) * relevance + share * ((weights * unanswered) @ answers)
        best = int(np.argmax(np.where(open_, gains, -np.inf)))
        chosen.append((pool[best], float(gains[best]) * top))
        open_[best] = False
        unanswered *= 1 - answers[:, best]
    taken = {name for name, _ in chosen}
    return (chosen + [(name, (1 - share) * s) for name, s in whole if name not in taken])[:limit]
