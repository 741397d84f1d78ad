#!/usr/bin/env bash
# Install what the benchmarks need beside toolbridge (idempotent; run scripts/setup.sh first):
#   .venv/                  the `bench` extra of pyproject.toml (anthropic-tokenizer: no dependencies),
#                           installed by requirement so toolbridge itself is not reinstalled
#   .bench-venv/fastmcp/    FastMCP in its own virtualenv: it pins its own `mcp`, so it never meets ours
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
FASTMCP=${FASTMCP:-fastmcp==4.2.3}
PIP_FLAGS=(--quiet --disable-pip-version-check)

mapfile -t extra < <(.venv/bin/python -c \
  'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["bench"]))')
.venv/bin/pip install "${PIP_FLAGS[@]}" "${extra[@]}"

if [ ! -x .bench-venv/fastmcp/bin/python ] || ! .bench-venv/fastmcp/bin/pip show fastmcp >/dev/null 2>&1; then
  "$PYTHON" -m venv .bench-venv/fastmcp
  .bench-venv/fastmcp/bin/pip install "${PIP_FLAGS[@]}" "$FASTMCP"
fi
echo "benchmarks are set up: .venv/bin/python -m bench.overhead | bench.tokens | bench.scale" >&2
