"""Public tool-retrieval sets for `bench.search_eval`: the Berkeley Function-Calling Leaderboard, and MetaTool.

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

MetaTool (MIT, the GitHub repository HowieHwong/MetaTool at commit 35e81bb, not on any package registry) asks
which of 199 tools (ChatGPT plugins and merged groups of them, a description each, no parameters) a request
needs: requests that describe what they want rather than name an action ("Can you find a gif of a sunset on the
beach?"). Given a git checkout of it (`--metatool DIR`), this script writes `.bench-data/metatool/`:
`single` (a fixed tenth of its 20,614 single-tool requests, chosen by a hash of the request) and `multi` (its
497 two-tool requests). Each tool is a server of its own (`metatool-` and consonants), as a plugin is.
Run: .venv/bin/python -m bench.public_sets [--metatool DIR]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
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


def _label(n: int, prefix: str = "bfcl-") -> str:
    """`prefix` and three consonants from `n` (8,000 labels)."""
    return prefix + "".join(CONSONANTS[n // len(CONSONANTS) ** i % len(CONSONANTS)] for i in (2, 1, 0))


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


METATOOL_COMMIT = "35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb"
METATOOL_SHARE = 10  # one single-tool request in this many is kept


def _git_file(checkout: Path, path: str) -> str:
    """A file of the pinned MetaTool commit, whatever the checkout's work tree holds."""
    return subprocess.run(["git", "-C", str(checkout), "show", f"{METATOOL_COMMIT}:{path}"], capture_output=True,
                          text=True, check=True).stdout


def metatool(checkout: Path) -> dict[str, tuple[dict, list[dict]]]:
    """MetaTool's catalog (a merged tool's description first, else its plugin's) and its two query sets."""
    described = json.loads(_git_file(checkout, "dataset/plugin_des.json"))
    described |= json.loads(_git_file(checkout, "dataset/big_tool_des.json"))
    rows = list(csv.DictReader(io.StringIO(_git_file(checkout, "dataset/data/all_clean_data.csv"))))
    multi = json.loads(_git_file(checkout, "dataset/data/multi_tool_query_golden.json"))
    names = sorted({r["Tool"] for r in rows} | {t for q in multi for t in q["tool"]})
    servers = {name: _label(i, "metatool-") for i, name in enumerate(names)}
    catalog = {"servers": {servers[name]: {"source": f"github:HowieHwong/MetaTool@{METATOOL_COMMIT[:7]}", "tools": [
        {"name": name, "description": described[name], "inputSchema": {"type": "object", "properties": {}}}]}
        for name in names}}
    gold = qualify_all(servers)
    single = [{"id": f"single-{i}", "query": r["Query"], "gold": [gold[r["Tool"]]]} for i, r in enumerate(rows)
              if int(hashlib.sha256(r["Query"].encode()).hexdigest(), 16) % METATOOL_SHARE == 0]
    pairs = [{"id": f"multi-{i}", "query": q["query"], "gold": sorted(gold[t] for t in set(q["tool"]))}
             for i, q in enumerate(multi)]
    return {"single": (catalog, single), "multi": (catalog, pairs)}


def qualify_all(servers: dict[str, str]) -> dict[str, str]:
    """Tool name -> its qualified name on its own server."""
    return {name: qualify_names(server, [name])[name] for name, server in servers.items()}


def write(out: Path, label: str, catalog: dict, queries: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "catalog.json").write_text(json.dumps(catalog))
    (out / "queries.json").write_text(json.dumps(queries, indent=0))
    tools = sum(len(s["tools"]) for s in catalog["servers"].values())
    print(f"{label}: {len(queries)} queries over {tools} tools on {len(catalog['servers'])} servers -> {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metatool", type=Path, help=f"a git checkout of HowieHwong/MetaTool with {METATOOL_COMMIT}")
    args = parser.parse_args()
    with zipfile.ZipFile(wheel()) as archive:
        for name, categories in SETS.items():
            write(OUT / name, f"bfcl/{name}", *build(categories, archive))
    if args.metatool:
        for name, (catalog, queries) in metatool(args.metatool).items():
            write(ROOT / "metatool" / name, f"metatool/{name}", catalog, queries)


if __name__ == "__main__":
    main()
