"""Lexical tool search (SPEC §6.6): a BM25F-style ranking over name, server, description and params.

Pure (stdlib and numpy) so the bridge, tests and benchmarks share one implementation. The index keeps
per-server postings so a server's tool change touches only that server's entries; corpus-wide
statistics (document frequency, average lengths) are maintained incrementally, and scoring runs over
per-term arrays (`_postings`), kept per server in flat arrays.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Collection, Generator, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from proxy.search import _postings as postings
from proxy.search._clauses import balance_clauses, diversify, steps_of
from proxy.search._documents import FIELDS, SearchDoc, field_counts, name_acronyms, server_boilerplate
from proxy.search._stemming import STOP_WORDS, split_values, split_words, stem
from proxy.search._synonyms import synonyms


@dataclass(frozen=True)
class Ranking:
    """The ranking's free parameters (bench/search_fit.py cross-validates how they are fitted); `weights` and
    `b` are per field of FIELDS. `clause_balance` applies only to the fused ranking's lexical leg (`scored`).
    The values a request names (`split_values`) count apart from its words: a path's or an e-mail address's words
    at `literals` (the words saying what kind of file it is at 1: "xlsx" says Excel), a URL's at 1, quoted text's
    at `quoted`, its numbers at `numbers`, and the kind of a URL or path ("url", "file") as a query term at
    `value_kinds`.
    A term's weight counts at most `repeats` times in a tool's score however often a request says it (its server
    evidence and a step's share keep the request's emphasis). `best_terms`: a tool's lexical score
    (`search`) counts only its best-matching terms of a request, so a long request is answered by the tools that
    match a few of its words well rather than by a long generic description that touches many of them.
    `server_evidence` weighs what a tool's server says (`_server_evidence`) in the lexical ranking (`search`),
    `fused_server_evidence` in the fused ranking's lexical leg (`scored`). `step_diversity` is the share of a
    multi-step request's lexical ranking (`search`) that rewards covering each of its steps (`_diversified`)."""

    weights: tuple[float, ...] = (3.0, 2.0, 3.0, 1.0, 1.0, 0.25)
    b: tuple[float, ...] = (0.3, 0.0, 0.5, 0.75, 0.5, 0.75)
    k1: float = 2.0
    synonyms: float = 0.3
    name_coverage: float = 0.5
    clause_balance: float = 0.5
    literals: float = 0.0
    quoted: float = 0.5
    value_kinds: float = 0.25
    server_evidence: float = 0.75
    fused_server_evidence: float = 0.5
    step_diversity: float = 0.5
    numbers: float = 0.5
    repeats: float = 2.0
    best_terms: int = 8


RANKING = Ranking()
PREFIX_MIN = 4
VALUE_KIND_TERMS = frozenset({"url", "file"})  # an e-mail address or a quoted text says nothing of the tool
COVERAGE_WORDS = 6
STEP_DEPTH = 30  # candidates for a multi-step request: its best tools, and each step's (`_diversified`)


@dataclass(frozen=True, slots=True)
class _Scope:
    """A session's scope as document ids: their mask, and how many of them each server number has."""

    mask: npt.NDArray[np.bool_]
    server_sizes: npt.NDArray[np.int64]


@dataclass(slots=True)
class _Entry:
    """What the index keeps per tool once its postings are built: not the texts (~1 KB a tool)."""

    raw_name: str
    name_terms: tuple[str, ...]
    doc_id: int  # its tokens per field are the row `doc_id` of `DocIds.lengths`


# Session scopes whose document mask is kept until the index changes (views are cached, so few recur).
SCOPE_MASKS = 8


class SearchIndex:
    """Incremental inverted index; `search` scores only documents that share a query term."""

    def __init__(self, ranking: Ranking = RANKING) -> None:
        self.ranking = ranking
        self._servers: dict[str, list[str]] = {}
        self._server_numbers: dict[str, int] = {}  # every server ever indexed, for `DocIds.servers`
        self._server_sizes = np.zeros(0)  # tools per server number
        self._entries: dict[str, _Entry] = {}
        self._docs = postings.DocIds(len(FIELDS))
        self._postings: dict[str, int] = {}  # term -> how many servers have it
        self._blocks: dict[str, postings.Block] = {}  # server -> its postings
        self._term_ids: dict[str, int] = {}  # every term ever seen, for the blocks' compact keys
        self._terms: list[str] = []
        self._total_lengths = [0] * len(FIELDS)
        # Lazy caches: arrays per term (dropped when its postings change), the rest until any change.
        self._arrays: postings.TermCache[postings.Chunk] = postings.TermCache()
        self._factors: postings.Floats | None = None  # per-doc field weight / length norm
        self._impacts_cache: postings.TermCache[tuple[postings.Ids, postings.Floats]] = postings.TermCache()
        self._masks: dict[int, tuple[frozenset[str], _Scope]] = {}
        self._exact: dict[str, str | tuple[str, ...]] = {}  # almost always one name: the name, not a tuple
        self.version = 0  # changes with every change to the tools or the ranking, so rankings can be kept
        self._vocabulary: list[str] | None = None  # every term, sorted, for prefix completion

    def __len__(self) -> int:
        return len(self._entries)

    def retune(self, ranking: Ranking) -> None:
        """Rank with other parameters from now on (the benchmark's fitting); postings stay as they are."""
        self.ranking = ranking
        self._invalidate()

    def set_server(self, server: str, docs: Iterable[SearchDoc]) -> None:
        """Replace one server's tools; other servers' postings stay untouched."""
        for _ in self.set_server_steps(server, docs):
            pass

    def set_server_steps(self, server: str, docs: Iterable[SearchDoc]) -> Generator[None, None, None]:
        """`set_server` a step per tool, so a caller can yield between (thousands of tools take seconds); the index
        changes in the last step only, so a search between steps sees it as it was."""
        unique = list(dict((d.name, d) for d in docs).values())
        boilerplate = server_boilerplate(unique)
        acronyms = name_acronyms(unique)
        counted = []
        for doc in unique:
            counted.append((doc, field_counts(doc, boilerplate, acronyms)))
            yield
        self._install(server, counted)

    def _install(
        self, server: str, counted: list[tuple[SearchDoc, tuple[dict[str, tuple[int, ...]], tuple[int, ...]]]]
    ) -> None:
        self.remove_server(server)
        number = self._server_numbers.setdefault(server, len(self._server_numbers))
        if number >= len(self._server_sizes):
            self._server_sizes = np.concatenate([self._server_sizes, np.zeros(max(8, number + 1))])
        names: list[str] = []
        rows: dict[int, tuple[list[int], list[tuple[int, ...]]]] = defaultdict(lambda: ([], []))
        for doc, (tfs, lengths) in counted:
            if doc.name in self._entries:  # another server's tool by that name is indexed already
                continue
            name_terms = tuple(t for t, f in tfs.items() if f[0])
            doc_id = self._docs.add(doc.name, lengths, number)
            self._entries[doc.name] = _Entry(doc.raw_name, name_terms, doc_id)
            self._add_lengths(lengths, 1)
            for term, tf in tfs.items():
                row = rows[self._term_id(term)]
                row[0].append(doc_id)
                row[1].append(tf)
            for key in _exact_keys(doc):
                held = self._exact.get(key)
                self._exact[key] = doc.name if held is None else (*_names(held), doc.name)
            names.append(doc.name)
        for term_id in rows:
            term = self._terms[term_id]
            self._postings[term] = self._postings.get(term, 0) + 1
            self._arrays.discard(term)
        self._blocks[server] = postings.Block(rows, len(FIELDS))
        self._servers[server] = names
        self._server_sizes[number] = len(names)

    def _term_id(self, term: str) -> int:
        term_id = self._term_ids.get(term)
        if term_id is None:
            term_id = self._term_ids[term] = len(self._terms)
            self._terms.append(term)
        return term_id

    def remove_server(self, server: str) -> None:
        """Drop one server's tools from the index."""
        block = self._blocks.pop(server, None)
        for term_id in block.term_ids.tolist() if block is not None else ():
            term = self._terms[term_id]
            self._arrays.discard(term)
            self._postings[term] -= 1
            if not self._postings[term]:
                del self._postings[term]
        if server in self._servers:
            self._server_sizes[self._server_numbers[server]] = 0
        for name in self._servers.pop(server, []):
            entry = self._entries.pop(name)
            self._add_lengths(tuple(self._docs.lengths[entry.doc_id].tolist()), -1)
            self._docs.remove(entry.doc_id)
            for key in {name.lower(), entry.raw_name.lower()}:
                rest = tuple(n for n in _names(self._exact.get(key, ())) if n != name)
                if rest:
                    self._exact[key] = rest[0] if len(rest) == 1 else rest
                else:
                    self._exact.pop(key, None)

    def _add_lengths(self, lengths: tuple[int, ...], sign: int) -> None:
        for i, n in enumerate(lengths):
            self._total_lengths[i] += sign * n
        self._invalidate()

    def _invalidate(self) -> None:
        """Drop what depends on the parameters or the corpus-wide statistics."""
        self.version += 1
        self._vocabulary = None
        self._factors = None
        self._impacts_cache.clear()
        self._masks.clear()

    def _doc_factors(self) -> postings.Floats:
        """BM25F per-field multipliers per document id, recomputed after a change."""
        if self._factors is None:
            n_docs = len(self._entries)
            avgs = [max(total / n_docs, 1e-9) for total in self._total_lengths]
            self._factors = postings.field_factors(self._docs.lengths, self.ranking.weights, self.ranking.b, avgs)
        return self._factors

    def search(self, query: str, *, limit: int, scope: Collection[str] | None = None) -> list[str]:
        """Qualified names best first; [] when no query term is known to the index."""
        return [name for name, _ in self.search_scored(query, limit=limit, scope=scope)]

    def search_scored(
        self, query: str, *, limit: int, scope: Collection[str] | None = None
    ) -> list[tuple[str, float | None]]:
        """`search` with each tool's BM25F score (a multi-step request's: its gain, `_diversified`); None for a tool
        the query names exactly (it leads unscored)."""
        if limit <= 0 or not self._entries:
            return []
        exact = self.exact(query, scope)
        named: list[tuple[str, float | None]] = [(name, None) for name in exact]
        terms = self._query_terms(query)
        steps = steps_of(query) if self.ranking.step_diversity else []
        if len(steps) >= 2:
            ranked = self._diversified(terms, steps, limit, scope, exact)
        else:
            ranked = self._ranked(terms, limit, scope, exact)
        return (named + list(ranked))[:limit]

    def _diversified(
        self, terms: dict[str, float], steps: list[str], limit: int, scope: Collection[str] | None,
        exact: Collection[str],
    ) -> list[tuple[str, float]]:
        """A multi-step request's ranking (`diversify`): its best `STEP_DEPTH` tools and each step's, a step weighed
        by its share of the request's idf."""
        whole = self._ranked(terms, max(limit, STEP_DEPTH), scope, exact)
        aspects = []
        for step in steps:
            step_terms = self._query_terms(step)
            if ranked := self._ranked(step_terms, STEP_DEPTH, scope, exact):
                aspects.append((self._idf_mass(step_terms), dict(ranked)))
        return diversify(whole, aspects, limit, self.ranking.step_diversity, STEP_DEPTH)

    def _idf_mass(self, terms: dict[str, float]) -> float:
        """The summed idf of a request's known terms, each times its weight: how much of it a part says."""
        n_docs = len(self._entries)
        return sum(qtf * math.log(1 + (n_docs - (df := len(self._impacts(term)[0])) + 0.5) / (df + 0.5))
                   for term, qtf in terms.items() if term in self._postings)

    def scored(
        self, query: str, *, limit: int, scope: Collection[str] | None = None, exact: Collection[str] = ()
    ) -> list[tuple[str, float]]:
        """The fused ranking's lexical leg: the best `limit` tools other than `exact` with their scores, best
        first. Unlike `search`, a long request's clauses are balanced (`balance_clauses`): cross-validation
        favoured that beside the semantic leg, which matches each clause on its own, and not without it (`search`
        covers a multi-step request's steps one by one instead, `_diversified`)."""
        terms = balance_clauses(self._query_terms(query), query, self.ranking.clause_balance)
        return self._top(terms, limit, scope, exact, self.ranking.fused_server_evidence)

    def _ranked(
        self, terms: dict[str, float], limit: int, scope: Collection[str] | None, exact: Collection[str]
    ) -> list[tuple[str, float]]:
        """The lexical ranking's `_top` (`search`): with its server evidence and a tool's best terms only."""
        return self._top(terms, limit, scope, exact, self.ranking.server_evidence, self.ranking.best_terms)

    def _top(
        self, terms: dict[str, float], limit: int, scope: Collection[str] | None, exact: Collection[str],
        servers: float = 0.0, best: int = 0,
    ) -> list[tuple[str, float]]:
        if limit <= 0 or not self._entries:
            return []
        scores = self._score(terms, scope, servers, best)
        for name in exact:
            scores[self._entries[name].doc_id] = 0.0
        return sorted(self._cover(scores, terms, limit).items(), key=lambda kv: (-kv[1], kv[0]))[:limit]

    def exact(self, query: str, scope: Collection[str] | None = None) -> list[str]:
        """Tools named exactly by the whole query (qualified or raw name), in name order: they rank first."""
        return sorted(n for n in _names(self._exact.get(query.strip().lower(), ())) if scope is None or n in scope)

    def _query_terms(self, query: str) -> dict[str, float]:
        """Stemmed query terms with weights; the words of URLs and paths are weighed as `_values` says."""
        text, values = split_values(query)
        weights = self._word_terms(text)
        self._values(values, weights)
        return weights

    def _values(self, values: list[tuple[str, str, str]], weights: dict[str, float]) -> None:
        """Add the terms of the values a request names to `weights`: their words at the value's literal weight
        ("nginx", "build" name no capability), the words saying what kind of file it is at full weight ("xlsx"
        says Excel), and a URL's or path's kind ("url", "file") at its own weight, so a tool taking one ranks."""
        kind_weight = self.ranking.value_kinds
        for kind, value, file_kinds in values:
            literal = {"url": 1.0, "quoted": self.ranking.quoted}.get(kind, self.ranking.literals)
            parts = [(literal, value), (1.0 - literal, file_kinds)] if file_kinds else [(literal, value)]
            for share, text in parts:
                for term, weight in self._word_terms(text).items() if share else ():
                    weights[term] = weights.get(term, 0.0) + share * weight
            if kind_weight and kind in VALUE_KIND_TERMS and kind in self._postings:
                weights[kind] = max(weights.get(kind, 0.0), kind_weight)

    def _word_terms(self, query: str) -> dict[str, float]:
        """Stemmed query terms with weights: joined compounds, stop words dropped, unknown words by prefix."""
        words = split_words(query)
        weights: dict[str, float] = defaultdict(float)
        for first, second in itertools.pairwise(words):
            joined = stem(first + second)
            if joined in self._postings:
                weights[joined] += 1.0
        kept = [w for w in words if w not in STOP_WORDS] or words
        for word in kept:
            term = stem(word)
            if word.isdigit():  # "between 9 and noon", "a 4-star rating": a value, or "HTTP 404": a name
                if self.ranking.numbers and term in self._postings:
                    weights[term] += self.ranking.numbers
                continue
            if term in self._postings or len(term) < PREFIX_MIN:
                weights[term] += 1.0
                continue
            extensions = self._completions(term)
            for ext in extensions:
                weights[ext] += 1.0 / len(extensions)
        for term, weight in self._expansions([stem(w) for w in words], set(map(stem, kept))).items():
            weights.setdefault(term, weight)
        return weights

    def _completions(self, prefix: str) -> list[str]:
        """Indexed terms that begin with `prefix`, found by bisection in the sorted vocabulary: a scan of
        every term took ~0.45 ms a word, so a long request of unknown words held the event loop for seconds."""
        if self._vocabulary is None:
            self._vocabulary = sorted(self._postings)
        vocabulary, width = self._vocabulary, len(prefix)
        start = bisect.bisect_left(vocabulary, prefix)  # sorted terms keep their first `width` letters sorted
        return vocabulary[start : bisect.bisect_right(vocabulary, prefix, lo=start, key=lambda t: t[:width])]

    def _expansions(self, stems: list[str], kept: set[str]) -> dict[str, float]:
        """Synonyms of the query's words and two-word phrases, at the synonym weight split over a phrase."""
        if not self.ranking.synonyms:
            return {}
        table = synonyms()
        triggers = [(s,) for s in stems if s in kept] + list(itertools.pairwise(stems))
        out: dict[str, float] = {}
        for trigger in triggers:
            for member in table.get(trigger, ()):
                for term in member:
                    if term in self._postings:
                        out[term] = max(out.get(term, 0.0), self.ranking.synonyms / len(member))
        return out

    def _impacts(self, term: str) -> tuple[postings.Ids, postings.Floats]:
        """A term's document ids and saturated BM25F tf per document, cached until the index next changes."""
        cached = self._impacts_cache.get(term)
        if cached is None:
            arrays = self._arrays.get(term)
            if arrays is None:
                term_id = self._term_ids[term]
                parts = [chunk for block in self._blocks.values() if (chunk := block.get(term_id)) is not None]
                arrays = postings.joined(parts)
                self._arrays.put(term, arrays)
            ids, tfs = arrays
            cached = (ids, postings.impacts(ids, tfs, self._doc_factors(), self.ranking.k1))
            self._impacts_cache.put(term, cached)
        return cached

    def _score(
        self, terms: dict[str, float], scope: Collection[str] | None, servers: float = 0.0, best: int = 0
    ) -> postings.Floats:
        """BM25F score per document id (zero for documents out of scope or sharing no query term; with `best`, the sum
        of its `best` largest terms only), plus `servers` x its server's evidence (`_server_evidence`)."""
        n_docs = len(self._entries)
        plan = []
        for term, qtf in terms.items():
            if term in self._postings:
                ids, impacts = self._impacts(term)
                df = len(ids)
                idf = min(qtf, self.ranking.repeats) * math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
                plan.append((idf, ids, impacts))
        scores = postings.accumulate(plan, self._docs.capacity, best)
        scoped = self._scope(scope) if scope is not None else None
        if servers:
            scores += servers * self._server_evidence(terms, scores, scoped)
        if scoped is not None:
            scores *= scoped.mask
        return scores

    def _server_evidence(
        self, terms: dict[str, float], scores: postings.Floats, scoped: _Scope | None
    ) -> postings.Floats:
        """What each matched tool's server says about the request: per query term, the share of the server's tools
        that have it times its idf over servers. A request describing content ("find articles about space
        exploration") then reaches the server most of whose tools are about it (a web search) rather than the tool
        of another server whose name is the request's generic verb (`find`); every weight comes from the catalog.
        Within a scope only the tools in it count: a session's ranking says nothing of tools it cannot see."""
        n_servers = len(self._blocks)
        servers = self._docs.servers[: self._docs.capacity]
        mask = scoped.mask if scoped is not None else None
        sizes = scoped.server_sizes if scoped is not None else self._server_sizes
        width = len(sizes)
        per_server = np.zeros(width)
        for term, qtf in terms.items():
            if term in self._postings:
                ids, _ = self._impacts(term)
                if mask is not None:
                    ids = ids[mask[ids]]
                spread = self._postings[term]
                idf = qtf * math.log(1 + (n_servers - spread + 0.5) / (spread + 0.5))
                per_server += idf * np.bincount(servers[ids], minlength=width)
        per_server /= np.maximum(sizes, 1)
        return np.where(scores > 0, per_server[servers], 0.0)

    def _scope(self, scope: Collection[str]) -> _Scope:
        """The scope as documents; a frozenset's (a session view's) is kept until the index changes, so the
        several rankings of one request (a multi-step request's steps) and the session's next requests share it."""
        cached = self._masks.get(id(scope))
        if cached is not None and cached[0] is scope:
            return cached[1]
        ids = [entry.doc_id for name in scope if (entry := self._entries.get(name)) is not None]
        mask = postings.mask(self._docs.capacity, ids)
        sizes = np.bincount(self._docs.servers[: self._docs.capacity][mask], minlength=len(self._server_sizes))
        scoped = _Scope(mask, sizes)
        if isinstance(scope, frozenset):
            if len(self._masks) >= SCOPE_MASKS:
                del self._masks[next(iter(self._masks))]
            self._masks[id(scope)] = (scope, scoped)
        return scoped

    def _cover(self, scores: postings.Floats, terms: dict[str, float], limit: int) -> dict[str, float]:
        """Boost tools whose name the query covers (synonyms count at their weight), less so for long
        requests, which cover some name by chance. Only tools that can still reach the top `limit` are kept."""
        weight = self.ranking.name_coverage * min(1.0, COVERAGE_WORDS / max(1, sum(w >= 1 for w in terms.values())))
        names = self._docs.names

        def boost(doc_id: int, score: float) -> float:
            name_terms = self._entries[names[doc_id]].name_terms
            covered = sum(min(1.0, terms.get(t, 0.0)) for t in name_terms) / max(len(name_terms), 1)
            return score * (1 + weight * covered)

        return {names[i]: s for i, s in postings.top_boosted(scores, limit, 1 + weight, boost).items()}


def _names(held: str | tuple[str, ...]) -> tuple[str, ...]:
    return (held,) if isinstance(held, str) else held


def _exact_keys(doc: SearchDoc) -> set[str]:
    """Lower-cased qualified and raw names; a name already in lower case is reused, not copied."""
    return {name if (lower := name.lower()) == name else lower for name in (doc.name, doc.raw_name)}
