"""What a search costs next to what a call costs, through the real proxy over stdio.

Serves about 10,000 real tools (the real-fleet catalog, served 12 times over by one upstream)
plus a one-tool echo server through `toolbridge serve`, then measures side by side in one run: a
call straight to the echo server, the same call proxied through `tool_call`, and `tool_search`
over everything; and, for reference, the same search in-process (`bridge.search`, no transport).
Run: `.venv/bin/python -m bench.call_latency [--catalogs DIR]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import yaml
from mcp import Client, StdioServerParameters, stdio_client

from bench.search_eval import build_catalog
from proxy.downstream import bridge

REPO = Path(__file__).resolve().parent.parent
CATALOG_SERVER = str(REPO / "tests" / "servers" / "catalog_server.py")
QUERIES = ["github create issue", "read a file", "take a browser screenshot", "list azure storage accounts",
           "add a row to a spreadsheet", "what time is it in Tokyo", "query mongodb collection"]


def _stdio(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=list(args), cwd=str(REPO))


def _write_config(directory: Path, catalog: Path, copies: int) -> None:
    (directory / "upstreams").mkdir()
    servers = {"big": ["--catalog", str(catalog), "--copies", str(copies)],
               "echo": ["--tools", "1", "--prefix", "echo"]}
    for name, args in servers.items():
        spec = {"command": sys.executable, "args": [CATALOG_SERVER, *args], "connect_timeout": 120}
        (directory / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({"startup_wait": 120}))


async def _timed(runs: int, action: Callable[[int], Awaitable[object]]) -> list[float]:
    await action(0)  # warm up
    samples = []
    for index in range(runs):
        started = time.perf_counter()
        await action(index)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _row(label: str, samples: list[float], reference: float) -> str:
    median = statistics.median(samples)
    p95 = sorted(samples)[int(len(samples) * 0.95) - 1]
    return f"{label:<40} p50 {median:7.2f} ms   p95 {p95:7.2f} ms   {median / reference:5.2f}x direct"


def _in_process_ms(catalog: Path, copies: int, runs: int) -> list[float]:
    """`bridge.search` on the tools the proxy serves (named as tests/servers/catalog_server.py does)."""
    servers = json.loads(catalog.read_text())["servers"]
    tools = [{**t, "name": f"{name}{copy}_{t['name']}"}
             for copy in range(copies) for name, entry in sorted(servers.items()) for t in entry["tools"]]
    built = build_catalog({"big": tools})
    view = built.for_profile("default")
    for query in QUERIES:  # warm: the first query after an index change computes the length norms
        bridge.search(built, view, {"queries": [query]})
    samples = []
    for index in range(runs):
        started = time.perf_counter()
        bridge.search(built, view, {"queries": [QUERIES[index % len(QUERIES)]]})
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def main(catalog: Path, copies: int, runs: int) -> None:
    async with Client(stdio_client(_stdio(CATALOG_SERVER, "--tools", "1", "--prefix", "echo"))) as direct:
        direct_ms = await _timed(runs, lambda i: direct.call_tool("echo_0000", {"value": i}))
    with tempfile.TemporaryDirectory() as temp:
        _write_config(Path(temp), catalog, copies)
        params = _stdio("-m", "proxy", "serve", "--config-dir", temp, "--log-level", "warning")
        async with Client(stdio_client(params), mode="legacy") as proxy:
            tools = (await proxy.list_tools()).tools  # waits for the whole fleet (startup_wait)
            count = (tools[0].description or "").split()[1]  # "Search N deferred tools ..."
            call_ms = await _timed(runs, lambda i: proxy.call_tool(
                "tool_call", {"name": "echo__echo_0000", "arguments": {"value": i}}))
            search_ms = await _timed(runs, lambda i: proxy.call_tool(
                "tool_search", {"queries": [QUERIES[i % len(QUERIES)]]}))
    in_process_ms = _in_process_ms(catalog, copies, runs)
    reference = statistics.median(direct_ms)
    print(f"{count} tools behind the proxy, {runs} runs each, stdio both ways")
    print(_row("direct call to the upstream", direct_ms, reference))
    print(_row("proxied call (tool_call)", call_ms, reference))
    print(_row(f"tool_search over {count} tools", search_ms, reference))
    print(_row("  of which bridge.search (in-process)", in_process_ms, reference))
    print(f"search / proxied call: {statistics.median(search_ms) / statistics.median(call_ms):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalogs", type=Path, default=REPO.parent / "shared" / "catalogs")
    parser.add_argument("--copies", type=int, default=12, help="real-fleet copies (12 x 839 tools)")
    parser.add_argument("--runs", type=int, default=200)
    options = parser.parse_args()
    anyio.run(main, options.catalogs / "real-fleet.json", options.copies, options.runs)
