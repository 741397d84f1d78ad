"""A stdio MCP server that serves the tools of one JSON file and starts in a blink.

Large fleets (a hundred upstreams, 50,000 tools) would otherwise measure Python importing the SDK
a hundred times (~0.5 s of CPU each on this machine), not the proxy; `--sdk` in the benchmarks
uses `bench/upstream.py --tools FILE` instead for that real cost. Standard library only; handshake
era (it answers `server/discover` with "method not found", as every pre-2026 server does), one
page of tools; every call echoes its arguments back.
Run: `python bench/catalog_upstream.py TOOLS.json` (a JSON list of wire-format tool objects).
"""

from __future__ import annotations

import json
import sys

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def answer(request: dict, tools: list[dict]) -> dict | None:
    method, ident, params = request.get("method"), request.get("id"), request.get("params") or {}
    if ident is None:
        return None  # a notification
    if method == "initialize":
        asked = params.get("protocolVersion")
        result: dict = {"protocolVersion": asked if asked in VERSIONS else VERSIONS[-1],
                        "capabilities": {"tools": {}}, "serverInfo": {"name": "catalog", "version": "1.0"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps(params.get("arguments") or {})}]}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as file:
        tools = json.load(file)
    for line in sys.stdin:
        reply = answer(json.loads(line), tools)
        if reply is not None:
            sys.stdout.write(json.dumps(reply, separators=(",", ":")) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
