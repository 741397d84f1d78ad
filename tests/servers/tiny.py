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
        result = {"protocolVersion": VERSION, "capabilities": {"tools": {"listChanged": True}},
                  "serverInfo": {"name": "tiny", "version": "1.0"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS + (PID_TOOL if "--pid" in sys.argv else [])}
    elif method == "tools/call" and (request.get("params") or {}).get("name") == "pid":
        result = {"content": [{"type": "text", "text": str(os.getpid())}]}
    elif method == "tools/call" and (request.get("params") or {}).get("name") == "burst":
        burst(int(request["params"].get("arguments", {}).get("count", 1)))
        result = {"content": [{"type": "text", "text": "ok"}]}
    elif method == "tools/call":
        text = (request.get("params") or {}).get("arguments", {}).get("text", "")
        result = {"content": [{"type": "text", "text": text}]}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def burst(count: int) -> None:
    """Add `count` tools, announcing each with its own list_changed."""
    for _ in range(count):
        TOOLS.append({"name": f"burst_{len(TOOLS)}", "inputSchema": {"type": "object"}})
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n")
    sys.stdout.flush()


def _option(flag: str) -> str | None:
    return sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv else None


def deep_tool(levels: int) -> dict:
    """A tool whose schema nests `levels` objects deep."""
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return {"name": "deep", "description": "Nested too deep.", "inputSchema": schema}


def main() -> None:
    if "--fail-while" in sys.argv and os.path.exists(sys.argv[sys.argv.index("--fail-while") + 1]):
        sys.exit(3)
    if "--hang" in sys.argv:
        time.sleep(3600)
    if "--slow-start" in sys.argv:
        time.sleep(float(sys.argv[sys.argv.index("--slow-start") + 1]))
    if (description := _option("--description")) is not None:  # `echo`'s, and its parameter's: any text, markup too
        TOOLS[0]["description"] = description
        TOOLS[0]["inputSchema"]["properties"]["text"]["description"] = description
    if (levels := _option("--deep-tool")) is not None:
        TOOLS.append(deep_tool(int(levels)))
    TOOLS.extend({"name": f"filler_{i:03d}", "description": f"Filler tool number {i}.",
                  "inputSchema": {"type": "object"}} for i in range(int(_option("--extra-tools") or 0)))
    if "--burst-tool" in sys.argv:
        TOOLS.append({"name": "burst", "description": "Add tools, one list_changed each.",
                      "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}}})
    noise = int(_option("--noise") or 0)  # lines that are not JSON-RPC, printed before each answer
    for line in sys.stdin:
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write("starting up... not JSON\n" * noise)
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
