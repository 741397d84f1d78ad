"""Embeddings kept on disk, by a hash of the model and the embedded text, so a restart or a reload embeds only
what changed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from proxy.search._minilm import DIMENSIONS, MiniLM

logger = logging.getLogger(__name__)

CHECKPOINT_EVERY = 32  # texts embedded between two cancellation points
KEEP_STALE = 10_000  # cached vectors of tools not in the fleet now (a server removed, then back) kept at most
SAVE_EVERY = 10.0  # s between two saves of the cache while a long embedding runs, so a crash keeps most of it


def no_checkpoint() -> None:
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

    def get(self, texts: Sequence[str], checkpoint: Callable[[], None] = no_checkpoint) -> Any:
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
