#!/usr/bin/env bash
# FastMCP in its own venv for bench/search_eval.py's check that FastMCPBM25 ranks exactly as FastMCP's
# BM25SearchTransform does (FastMCP pins its own mcp, so it never goes into .venv). Optional: without it
# the benchmark still reports the fastmcp-bm25 row from the re-stated algorithm.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .search-bench-venv/bin/python ] || "${PYTHON:-python3}" -m venv .search-bench-venv
.search-bench-venv/bin/pip install --quiet --disable-pip-version-check 'fastmcp==4.1.6'
