"""Public tool-retrieval sets for `bench.search_eval`, rebuilt from the Berkeley Function-Calling Leaderboard.

BFCL (Apache-2.0) ships its questions, function documents and answers in the `bfcl-eval` package on PyPI.
Each of its entries is a user request, the functions offered with it and the call(s) that answer it. Pooling
every entry's functions into one catalog turns an entry into a retrieval query over that whole pool: the
request is the query, and the answering functions are gold. A name is one tool: where entries define a
function name differently, its first definition is kept.

- `bfcl/ast`: the expert-written categories (`simple_python`, `multiple`, `parallel_multiple`);
- `bfcl/live`: the user-contributed ones (`live_simple`, `live_multiple`, `live_parallel_multiple`).

The functions first offered together in one entry (a user's API, a themed set) make one server, labelled
`bfcl-` and consonants (`bfcl-bcd`: no word a request could contain). The data is downloaded, never committed: this
script writes `.bench-data/bfcl/{ast,live}/{catalog,queries}.json` (ignored by git).
Run: .venv/bin/python -m bench.public_sets
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

from proxy.names import qualify_names

PACKAGE, VERSION = "bfcl-eval", "2026.3.23"
WHEEL = f"bfcl_eval-{VERSION}-py3-none-any.whl"
ROOT = Path(__file__).resolve().parent.parent / ".bench-data"
OUT = ROOT / "bfcl"
SETS = {
    "ast": ("simple_python", "multiple", "parallel_multiple"),
    "live": ("live_simple", "live_multiple", "live_parallel_multiple"),
}


def wheel() -> Path:
    """The pinned wheel, downloaded once with pip."""
    path = ROOT / "pkgs" / WHEEL
    if not path.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(path.parent),
                        f"{PACKAGE}=={VERSION}"], check=True)
    return path


def _lines(archive: zipfile.ZipFile, name: str) -> Iterator[dict]:
    for line in archive.read(f"bfcl_eval/data/{name}").decode().splitlines():
        if line.strip():
            yield json.loads(line)


def _tool(function: dict) -> dict:
    """A BFCL function document as an MCP tools/list entry (BFCL writes JSON Schema's "object" as "dict")."""
    schema = json.loads(json.dumps(function.get("parameters") or {}).replace('"type": "dict"', '"type": "object"'))
    return {"name": function["name"], "description": function.get("description", ""), "inputSchema": schema}


CONSONANTS = "bcdfghjklmnpqrstvwxz"


def _label(n: int) -> str:
    """`bfcl-` and three consonants from `n` (8,000 labels)."""
    return "bfcl-" + "".join(CONSONANTS[n // len(CONSONANTS) ** i % len(CONSONANTS)] for i in (2, 1, 0))


def build(categories: tuple[str, ...], archive: zipfile.ZipFile) -> tuple[dict, list[dict]]:
    """The pooled catalog and the queries of some BFCL categories."""
    servers: dict[str, dict[str, dict]] = {}  # server -> tool name -> tool
    qualified: dict[str, str] = {}  # function name -> qualified name
    queries = []
    for category in categories:
        answers = {a["id"]: a["ground_truth"] for a in _lines(archive, f"possible_answer/BFCL_v4_{category}.json")}
        for entry in _lines(archive, f"BFCL_v4_{category}.json"):
            new = {f["name"]: _tool(f) for f in entry["function"] if f["name"] not in qualified}
            if new:
                server = _label(len(servers))
                servers[server] = new
                qualified |= qualify_names(server, new)
            request = " ".join(m["content"] for m in entry["question"][0] if m["role"] == "user")
            gold = sorted({qualified[name] for call in answers[entry["id"]] for name in call if name in qualified})
            if gold:
                queries.append({"id": entry["id"], "query": request, "gold": gold})
    catalog = {"servers": {s: {"source": f"pypi:{PACKAGE}@{VERSION}", "tools": sorted(tools.values(),
                                                                                      key=lambda t: t["name"])}
                           for s, tools in sorted(servers.items())}}
    return catalog, queries


def main() -> None:
    with zipfile.ZipFile(wheel()) as archive:
        for name, categories in SETS.items():
            catalog, queries = build(categories, archive)
            out = OUT / name
            out.mkdir(parents=True, exist_ok=True)
            (out / "catalog.json").write_text(json.dumps(catalog))
            (out / "queries.json").write_text(json.dumps(queries, indent=0))
            tools = sum(len(s["tools"]) for s in catalog["servers"].values())
            servers = len(catalog["servers"])
            print(f"bfcl/{name}: {len(queries)} queries over {tools} tools on {servers} servers -> {out}")


if __name__ == "__main__":
    main()
