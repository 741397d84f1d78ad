"""Public tool-retrieval sets for `bench.search_eval`: the Berkeley Function-Calling Leaderboard, MetaTool, MCP-Bench.

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

MCP-Bench (Apache-2.0, the GitHub repository Accenture/mcp-bench at commit 09e5233) gives each task the real MCP
servers it needs (28, as source under `mcp_servers/`) but no tool lists: given a git checkout (`--mcpbench DIR`),
this script reads every server's tools from the files the server `commands.json` launches defines them in, without
running anything (`bench.python_source`, `bench.script_source`), into one pooled catalog, a server per MCP-Bench
server (`Paper Search` -> `paper-search`). A task's query is its `fuzzy_description` (the request as a user puts
it; `task_description` names the tools), its gold the tools of its servers that its `dependency_analysis` and
`task_description` name (`resolve_gold`). It writes `.bench-data/mcpbench/`: `single` (single-server tasks) and
`multi` (two- and three-server tasks); a task naming no tool is dropped, and the count printed.
Run: .venv/bin/python -m bench.public_sets [--metatool DIR] [--mcpbench DIR]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

from bench.python_source import python_tools
from bench.script_source import script_tools
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


def _git_file(checkout: Path, path: str, commit: str = METATOOL_COMMIT) -> str:
    """A file of a pinned commit, whatever the checkout's work tree holds."""
    return subprocess.run(["git", "-C", str(checkout), "show", f"{commit}:{path}"], capture_output=True,
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


MCPBENCH_COMMIT = "09e52332b22428bf891be59047e01cb9adc063b4"
# Each server commands.json launches -> the files under mcp_servers/ that define its tools (the launched module
# and the modules it registers tools from; not the alternative server files some directories also hold).
MCPBENCH_SOURCES = {
    "Bibliomantic": ["bibliomantic-mcp-server/enhanced_bibliomantic_server.py"],
    "BioMCP": [f"biomcp/src/biomcp/{m}.py" for m in ("router", "thinking_tool", "individual_tools")],
    "Call for Papers": ["call-for-papers-mcp/call-for-papers-mcp-main/server.py"],
    "Car Price Evaluator": ["car-price-mcp-main/server.py"],
    "Context7": ["context7-mcp/src/index.ts"],
    "DEX Paprika": ["dexpaprika-mcp/src/index.js"],
    "FruityVice": ["fruityvice-mcp/server.py"],
    "Game Trends": ["game-trends-mcp/server.py"],
    "Google Maps": [f"mcp-google-map/src/tools/maps/{m}.ts" for m in (
        "searchNearby", "placeDetails", "geocode", "reverseGeocode", "distanceMatrix", "directions", "elevation")],
    "Huge Icons": ["hugeicons-mcp-server/src/index.ts"],
    "Hugging Face": ["huggingface-mcp-server/src/huggingface/server.py"],
    "Math MCP": ["math-mcp/src/index.ts"],
    "Medical Calculator": ["medcalc/medcalc/__main__.py"],
    "Metropolitan Museum": [f"metmuseum-mcp/src/tools/{m}.ts" for m in (
        "ListDepartmentsTool", "SearchMuseumObjectsTool", "GetObjectTool")],
    "Movie Recommender": ["movie-recommender-mcp/movie-reccomender-mcp/server.py"],
    "NASA Data": ["nasa-mcp/src/nasa_mcp/server.py"],
    "National Parks": ["mcp-server-nationalparks/src/server.ts", "mcp-server-nationalparks/src/schemas.ts"],
    "NixOS": ["mcp-nixos/mcp_nixos/server.py"],
    "OKX Exchange": ["okx-mcp/src/index.ts"],
    "OSINT Intelligence": ["mcp-osint-server/mcp_osint_server/mcp_osint_server/main.py"],
    "OpenAPI Explorer": ["openapi-mcp-server/index.js"],
    "Paper Search": ["paper-search-mcp/paper_search_mcp/server.py"],
    "Reddit": ["mcp-reddit/src/mcp_reddit/reddit_fetcher.py"],
    "Scientific Computing": [f"scientific_computation_mcp/src/{m}.py" for m in (
        "server", "linear_algebra", "vector_calculus", "visualization")],
    "Time MCP": ["time-mcp/src/mcp_server_time/server.py"],
    "Unit Converter": ["unit-converter-mcp/src/unit_converter_mcp/server.py"],
    "Weather Data": ["weather_mcp/server.py"],
    "Wikipedia": ["wikipedia-mcp/wikipedia_mcp/server.py"],
}
MCPBENCH_TASKS = {"single": ("single",), "multi": ("multi_2server", "multi_3server")}


def _mcpbench_file(checkout: Path, path: str) -> str:
    return _git_file(checkout, path, MCPBENCH_COMMIT)


def mcpbench_tools(checkout: Path) -> dict[str, list[dict]]:
    """Each MCP-Bench server's tools, read from the source of the server its commands.json launches."""
    launched = json.loads(_mcpbench_file(checkout, "mcp_servers/commands.json"))
    if set(launched) != set(MCPBENCH_SOURCES):
        raise SystemExit(f"commands.json names other servers: {sorted(set(launched) ^ set(MCPBENCH_SOURCES))}")
    servers = {}
    for server, paths in MCPBENCH_SOURCES.items():
        sources = [_mcpbench_file(checkout, f"mcp_servers/{path}") for path in paths]
        servers[server] = python_tools(sources) if paths[0].endswith(".py") else script_tools(sources)
    return servers


def server_slug(server: str) -> str:
    """`Paper Search` -> `paper-search`: the label an operator would give the server."""
    return re.sub(r"[^a-z0-9]+", "-", server.lower()).strip("-")


def resolve_gold(text: str, servers: dict[str, list[str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """The (server, tool) pairs a task's text names, and the `Server:name` references that name no tool.

    A tool is named as `Server:tool` (or in a list after it: `Server:mean, median`), or bare where no other of
    the task's servers has a tool of that name. A name that is a plain word (`search`, `max`, `rank`) counts bare
    only where it is written as a call or code (`rank(`, `` `rank` ``): in prose it is a word, not a tool.
    """
    gold, unresolved = set(), []
    owners: dict[str, list[str]] = {}
    for server, tools in servers.items():
        for tool in tools:
            owners.setdefault(tool, []).append(server)
    for server, tools in servers.items():
        for names in re.findall(rf"{re.escape(server)}\s*:\s*`?([A-Za-z][\w.-]*(?:`?\s*[,/]\s*`?[A-Za-z][\w.-]*)*)",
                                text):
            first, *rest = re.split(r"`?\s*[,/]\s*`?", names)
            if first.rstrip(".-") not in tools:
                unresolved.append(f"{server}:{first}")
            gold |= {(server, name) for name in (first.rstrip(".-"), *rest) if name in tools}
    for tool, where in owners.items():
        plain = re.fullmatch(r"[a-z]+", tool)
        pattern = rf"`{tool}`|(?<![\w.-]){tool}\(" if plain else rf"(?<![\w.-]){re.escape(tool)}(?![\w-])"
        if len(where) == 1 and re.search(pattern, text):
            gold.add((where[0], tool))
    return sorted(gold), unresolved


def mcpbench(checkout: Path) -> dict[str, tuple[dict, list[dict]]]:
    """MCP-Bench's pooled catalog and its single- and multi-server task sets."""
    tools = mcpbench_tools(checkout)
    print("mcpbench tools per server:", ", ".join(f"{s} {len(ts)}" for s, ts in sorted(tools.items())))
    source = f"github:Accenture/mcp-bench@{MCPBENCH_COMMIT[:7]}"
    catalog = {"servers": {server_slug(s): {"source": source, "tools": sorted(ts, key=lambda t: t["name"])}
                           for s, ts in sorted(tools.items())}}
    names = {s: [t["name"] for t in ts] for s, ts in tools.items()}
    qualified = {s: qualify_names(server_slug(s), ns) for s, ns in names.items()}
    out = {}
    for name, files in MCPBENCH_TASKS.items():
        queries, dropped, unresolved = [], 0, []
        for file in files:
            tasks = json.loads(_mcpbench_file(checkout, f"tasks/mcpbench_tasks_{file}_runner_format.json"))
            for group in tasks["server_tasks"]:
                for task in group["tasks"]:
                    text = f"{task['dependency_analysis']}\n{task['task_description']}"
                    gold, missed = resolve_gold(text, {s: names[s] for s in group["servers"]})
                    unresolved += missed
                    if gold:
                        queries.append({"id": task["task_id"], "query": task["fuzzy_description"],
                                        "gold": [qualified[s][t] for s, t in gold]})
                    else:
                        dropped += 1
        print(f"mcpbench/{name}: {dropped} tasks without a resolvable gold tool dropped; "
              f"{len(unresolved)} references to no extracted tool: {sorted(set(unresolved))}")
        out[name] = (catalog, queries)
    return out


def write(out: Path, label: str, catalog: dict, queries: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "catalog.json").write_text(json.dumps(catalog))
    (out / "queries.json").write_text(json.dumps(queries, indent=0))
    tools = sum(len(s["tools"]) for s in catalog["servers"].values())
    print(f"{label}: {len(queries)} queries over {tools} tools on {len(catalog['servers'])} servers -> {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metatool", type=Path, help=f"a git checkout of HowieHwong/MetaTool with {METATOOL_COMMIT}")
    parser.add_argument("--mcpbench", type=Path, help=f"a git checkout of Accenture/mcp-bench with {MCPBENCH_COMMIT}")
    args = parser.parse_args()
    with zipfile.ZipFile(wheel()) as archive:
        for name, categories in SETS.items():
            write(OUT / name, f"bfcl/{name}", *build(categories, archive))
    if args.metatool:
        for name, (catalog, queries) in metatool(args.metatool).items():
            write(ROOT / "metatool" / name, f"metatool/{name}", catalog, queries)
    if args.mcpbench:
        for name, (catalog, queries) in mcpbench(args.mcpbench).items():
            write(ROOT / "mcpbench" / name, f"mcpbench/{name}", catalog, queries)


if __name__ == "__main__":
    main()
