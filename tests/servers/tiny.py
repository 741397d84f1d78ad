"""A handshake-era-only stdio MCP server with no dependencies, so many start in a blink.

Used where process start-up cost would drown what a test measures (20 upstreams at once on a
small machine: importing the SDK costs ~0.8 s of CPU per process). It answers `server/discover`
with "method not found", as pre-2026 servers do, so `mode="auto"` clients fall back.
"""

from __future__ import annotations

import json
import os
import sys
import time

VERSION = "2025-06-18"
TOOLS = [{"name": "echo", "description": "Echo the text back.",
          "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]
PID_TOOL = [{"name": "pid", "description": "The server's process id (with --pid).", "inputSchema": {"type": "object"}}]


def answer(request: dict) -> dict | None:
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        result = {"protocolVersion": VERSION, "capabilities": {"tools": {}},
                  "serverInfo": {"name": "tiny", "version": "1.0"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS + (PID_TOOL if "--pid" in sys.argv else [])}
    elif method == "tools/call" and (request.get("params") or {}).get("name") == "pid":
        result = {"content": [{"type": "text", "text": str(os.getpid())}]}
    elif method == "tools/call":
        text = (request.get("params") or {}).get("arguments", {}).get("text", "")
        result = {"content": [{"type": "text", "text": text}]}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    if "--fail-while" in sys.argv and os.path.exists(sys.argv[sys.argv.index("--fail-while") + 1]):
        sys.exit(3)
    if "--hang" in sys.argv:
        time.sleep(3600)
    if "--slow-start" in sys.argv:
        time.sleep(float(sys.argv[sys.argv.index("--slow-start") + 1]))
    for line in sys.stdin:
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
