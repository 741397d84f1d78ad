#!/usr/bin/env bash
# Install toolbridge and the bundled fleet from scratch (idempotent; re-running is cheap).
#   .venv/            toolbridge with its test extras
#   .fleet/<pkg>/     each Python MCP server in its own virtualenv (their pins never meet ours)
#   node_modules/     the npm MCP servers pinned in package.json
# Every fleet executable is linked into .venv/bin, where toolbridge looks for stdio commands.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
PIP_FLAGS=(--quiet --disable-pip-version-check)

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/pip install "${PIP_FLAGS[@]}" -e '.[test,semantic,otel]'  # semantic: ~140 MB, otel: span export; both so their tests run in CI

for pkg in mcp-server-time mcp-server-git; do
  if [ ! -x ".fleet/$pkg/bin/$pkg" ]; then
    "$PYTHON" -m venv ".fleet/$pkg"
    ".fleet/$pkg/bin/pip" install "${PIP_FLAGS[@]}" "$pkg"
  fi
  ln -sf "../../.fleet/$pkg/bin/$pkg" ".venv/bin/$pkg"
done

if [ ! -d node_modules/@modelcontextprotocol/server-memory ] || [ package.json -nt node_modules ]; then
  PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
    npm install --no-audit --no-fund --loglevel=error
  touch node_modules
fi
for bin in node_modules/.bin/mcp-server-*; do
  ln -sf "../../$bin" ".venv/bin/$(basename "$bin")"
done
echo "toolbridge is set up: .venv/bin/toolbridge" >&2
