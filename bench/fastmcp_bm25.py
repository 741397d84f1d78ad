"""FastMCP's `BM25SearchTransform` ranking, run in FastMCP's own venv (it must not share toolbridge's).

Reads {"catalog": path, "queries": [text]} on stdin and writes one ranked list of qualified names per
query on stdout. It uses FastMCP's own index and searchable text (name, description, parameter names and
descriptions), so the figures are FastMCP's, not a reimplementation's. Set up by bench/setup_search.sh.
"""

from __future__ import annotations

import json
import re
import sys

from fastmcp.server.transforms.search.base import _extract_searchable_text
from fastmcp.server.transforms.search.bm25 import _BM25Index
from fastmcp.tools.base import Tool

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def main() -> None:
    request = json.load(sys.stdin)
    with open(request["catalog"]) as file:
        servers = json.load(file)["servers"]
    names, texts = [], []
    for server, body in servers.items():
        for t in body["tools"]:
            name = _UNSAFE.sub("_", f"{server}__{t['name']}")
            tool = Tool(name=name, description=t.get("description"), parameters=t.get("inputSchema") or {})
            names.append(name)
            texts.append(_extract_searchable_text(tool))
    index = _BM25Index()
    index.build(texts)
    json.dump([[names[i] for i in index.query(q, request.get("limit", 10))] for q in request["queries"]], sys.stdout)


if __name__ == "__main__":
    main()
