"""A dependency-free handshake-era stdio server that abuses the proxy in one of the ways real servers do.

`--description-mb N` lists a tool whose description is N MB; `--tools N` lists N tools more; `--deep N`
lists a tool whose schema nests N objects deep (next to `fine`); `--relist` announces a change after
every listing, so the proxy keeps reading the abuse (each listing changes `echo`'s description: a real
change); the `burst` tool sends `count` list_changed notifications before it answers. Every mode also
serves `echo`, so what reaches the registry shows.
"""

from __future__ import annotations

import json
import sys

VERSION = "2025-06-18"
CHANGED = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n"
OBJECT = {"type": "object"}


def _option(flag: str) -> int:
    return int(sys.argv[sys.argv.index(flag) + 1]) if flag in sys.argv else 0


def tools() -> list[str]:
    """The tools this run lists, as JSON (a deep schema is written out: `json` would recurse too deep)."""
    listed: list[dict] = [{"name": "echo"},  # main() writes echo's definition anew for each listing
                          {"name": "burst", "description": "Send `count` list_changed notifications.",
                           "inputSchema": OBJECT}]
    if size := _option("--description-mb"):
        listed.append({"name": "huge", "description": "x" * (size << 20), "inputSchema": OBJECT})
    listed += ({"name": f"many_{i}", "description": f"Made-up tool number {i}.", "inputSchema": OBJECT}
               for i in range(_option("--tools")))
    written = [json.dumps(tool) for tool in listed]
    if levels := _option("--deep"):
        schema = '{"type": "object", "properties": {"x": ' * levels + '{"type": "string"}' + "}}" * levels
        written += ['{"name": "deep", "inputSchema": ' + schema + "}",
                    json.dumps({"name": "fine", "inputSchema": OBJECT})]
    return written


def answer(request: dict, listing: str) -> str | None:
    """The reply line to `request` (None for a notification); a `burst` call writes its notifications first."""
    method, ident, params = request.get("method"), request.get("id"), request.get("params") or {}
    if ident is None:
        return None
    if method == "tools/list":
        return '{"jsonrpc": "2.0", "id": ' + json.dumps(ident) + ', "result": ' + listing + "}\n"
    if method == "initialize":
        result: dict = {"protocolVersion": VERSION, "capabilities": {"tools": {"listChanged": True}},
                        "serverInfo": {"name": "hostile", "version": "1.0"}}
    elif method == "ping":
        result = {}
    elif method == "tools/call":
        arguments = params.get("arguments") or {}
        if params.get("name") == "burst":
            sys.stdout.write(CHANGED * int(arguments.get("count", 1)))
        result = {"content": [{"type": "text", "text": str(arguments.get("text", "ok"))}]}
    else:
        error = {"code": -32601, "message": "Method not found"}
        return json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}) + "\n"
    return json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}) + "\n"


def main() -> None:
    rest = ", ".join(tools()[1:])  # built once: the proxy's cost is what is measured
    listings = 0
    for line in sys.stdin:
        request = json.loads(line)
        listings += request.get("method") == "tools/list"
        echo = json.dumps({"name": "echo", "description": f"Echo the text back (listing {listings}).",
                           "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}})
        reply = answer(request, '{"tools": [' + echo + ", " + rest + "]}")
        if reply is not None:
            sys.stdout.write(reply)
            if request.get("method") == "tools/list" and "--relist" in sys.argv:
                sys.stdout.write(CHANGED)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
