"""What a client's context pays for the tools: every raw schema, against the `tools/list` a
200K-context client gets from toolbridge and the one FastMCP's proxy gives, on the same fleets.

Fleets: the real fleet (`bench/catalogs/real-fleet.json`, 23 servers, 839 tools) and synthetic
ones of real tools copied and renamed, `--per-server` to a server (`bench/fleets.py`). Each proxy serves the
fleet from its own stdio upstreams (`bench/catalog_upstream.py`), and an SDK `Client` lists its
tools. A `tools/list` is measured as its tools in compact wire JSON, in characters, as chars/4
(toolbridge's own estimate, SPEC 6.3) and in real tokens from `anthropic-tokenizer`'s embedded
BPE (offline; the JSON text, not a model's own tool-prompt rendering). "listing" is the catalog
that closes the `tool_search` description, against its budget (4000 estimated tokens at 200K).
Run: `.venv/bin/python -m bench.tokens [--sizes 1000,10000,50000] [--per-server 250] [--no-fastmcp]`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.types.version import LATEST_MODERN_VERSION

from bench.fleets import Fleet, real_fleet, synthetic_fleet, write_fleet, write_mcp_config, write_toolbridge_config
from bench.harness import FASTMCP_PYTHON, REPO, machine_summary, toolbridge_command

try:
    import anthropic_tokenizer
except ImportError:  # the `bench` extra
    raise SystemExit("bench/tokens.py needs anthropic-tokenizer: run bench/setup.sh") from None

CONTEXT_TOKENS = 200_000
BUDGET = 4000  # SPEC 6.3: min(listing_max_tokens 4000, 5% of 200K = 10000)
LISTING_HEADER = "Deferred tool catalog ("


@dataclass(frozen=True)
class Size:
    """A text's size three ways."""

    chars: int
    tokens: int

    @property
    def estimate(self) -> int:
        return -(-self.chars // 4)

    @staticmethod
    def of_tools(tools: list[dict[str, Any]]) -> Size:
        """The tools as they travel; tokens counted per tool (the same total, in bounded pieces)."""
        texts = [json.dumps(tool, separators=(",", ":"), ensure_ascii=False) for tool in tools]
        return Size(sum(map(len, texts)) + len(texts) + 1, sum(map(anthropic_tokenizer.count_tokens, texts)) + 1)

    @staticmethod
    def of_text(text: str) -> Size:
        return Size(len(text), anthropic_tokenizer.count_tokens(text))


@dataclass(frozen=True)
class Listed:
    tools: list[dict[str, Any]]
    seconds: float


async def _list(command: list[str]) -> Listed:
    """Start a server over stdio and list its tools (every page) as wire-format dicts."""
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO))
    started = time.perf_counter()
    # The era is pinned, not probed: FastMCP answers `server/discover` only once it has connected every
    # upstream, and at 50,000 tools that outlasts the SDK's 10 s probe (the late answer then makes the
    # connection refuse the fallback `initialize`).
    async with Client(stdio_client(params), mode=LATEST_MODERN_VERSION, read_timeout_seconds=900) as client:
        tools: list[types.Tool] = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            if (cursor := page.next_cursor) is None:
                break
    wire = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools]
    return Listed(wire, time.perf_counter() - started)


def _listing(tools: list[dict[str, Any]]) -> str:
    search = next((tool for tool in tools if tool["name"] == "tool_search"), None)
    description = (search or {}).get("description", "")
    start = description.find(LISTING_HEADER)
    return description[start:] if start >= 0 else ""


def _form(listing: str) -> str:
    """The listing's form read off its text (SPEC 6.4)."""
    if not listing:
        return "none"
    lines = listing.split("\n")[1:]
    summaries = sum("names not listed" in line for line in lines)
    headings = sum(bool(re.match(r"^\S+ tools \(\d+\):$", line)) for line in lines)
    if summaries and not headings:
        return "groups"
    if summaries:
        return "mixed"
    return "full" if any(line.startswith("- ") for line in lines) else "names"


def _cell(size: Size | None) -> str:
    return "-" if size is None else f"{size.chars:>11,} {size.estimate:>10,} {size.tokens:>10,}"


async def _measure(fleet: Fleet, temp: Path, fastmcp: bool) -> dict[str, Any]:
    commands = write_fleet(fleet, temp / "tools")
    raw_tools = [tool for tools in fleet.servers.values() for tool in tools]
    # The raw side goes through the same model as the proxied sides, so all three dump alike.
    raw = Size.of_tools([types.Tool.model_validate(t).model_dump(by_alias=True, exclude_none=True, mode="json")
                         for t in raw_tools])
    config = write_toolbridge_config(temp / "toolbridge", commands)
    toolbridge = await _list(toolbridge_command(config, "--context-tokens", str(CONTEXT_TOKENS)))
    listing = _listing(toolbridge.tools)
    result: dict[str, Any] = {
        "fleet": fleet, "raw": raw, "toolbridge": Size.of_tools(toolbridge.tools),
        "toolbridge_s": toolbridge.seconds, "listing": Size.of_text(listing), "form": _form(listing),
        "deferred": re.search(r"Search (\d+) deferred", json.dumps(toolbridge.tools)),
    }
    if fastmcp:
        mcp_config = write_mcp_config(temp / "fastmcp.json", commands)
        listed = await _list([str(FASTMCP_PYTHON), str(REPO / "bench" / "fastmcp_proxy.py"), str(mcp_config),
                              "--backend-mode", "auto"])  # the upstreams are handshake-era
        result.update(fastmcp=Size.of_tools(listed.tools), fastmcp_count=len(listed.tools), fastmcp_s=listed.seconds)
    return result


def _report(results: list[dict[str, Any]]) -> None:
    heading = f"{'chars':>11} {'chars/4':>10} {'tokens':>10}"
    print(f"\n{'fleet':<18} {'servers':>7} {'tools':>6} | raw schemas: {heading} | toolbridge tools/list: {heading} "
          f"| FastMCP tools/list: {heading}")
    for r in results:
        fleet: Fleet = r["fleet"]
        print(f"{fleet.label:<18} {len(fleet.servers):>7} {fleet.tool_count:>6} | {'':13}{_cell(r['raw'])} | "
              f"{'':23}{_cell(r['toolbridge'])} | {'':20}{_cell(r.get('fastmcp'))}")
    print(f"\n{'fleet':<18} {'tokens: toolbridge/raw':>22} {'FastMCP/raw':>11} | listing {'form':>6} {'chars':>7} "
          f"{'chars/4':>7} {'tokens':>7} {'budget':>6} {'fits (tokens)':>13} {'tokens/(chars/4)':>16} | "
          f"{'listed in (s): toolbridge':>26} {'FastMCP':>8}")
    for r in results:
        fleet, raw, toolbridge, listing = r["fleet"], r["raw"], r["toolbridge"], r["listing"]
        fastmcp = r.get("fastmcp")
        fits = "yes" if listing.tokens <= BUDGET else f"NO (+{listing.tokens - BUDGET})"
        deferred = int(r["deferred"].group(1)) if r["deferred"] else 0
        for proxy, count in (("toolbridge", deferred), ("FastMCP", r.get("fastmcp_count", fleet.tool_count))):
            if count != fleet.tool_count:
                print(f"  ! {proxy} served {count} of {fleet.tool_count} tools")
        print(f"{fleet.label:<18} {toolbridge.tokens / raw.tokens:>22.4f} "
              f"{(fastmcp.tokens / raw.tokens if fastmcp else float('nan')):>11.3f} | {'':7} {r['form']:>6} "
              f"{listing.chars:>7,} {listing.estimate:>7,} {listing.tokens:>7,} {BUDGET:>6} {fits:>13} "
              f"{listing.tokens / max(1, listing.estimate):>16.2f} | {r['toolbridge_s']:>26.1f} "
              f"{r.get('fastmcp_s', float('nan')):>8.1f}")


async def main(sizes: list[int], per_server: int, fastmcp: bool) -> None:
    print(__doc__.splitlines()[0])
    print(machine_summary())
    fastmcp = fastmcp and FASTMCP_PYTHON.exists()
    if not fastmcp:
        print("FastMCP column skipped (--no-fastmcp, or run bench/setup.sh)")
    results = []
    for fleet in [real_fleet(), *(synthetic_fleet(size, per_server) for size in sizes)]:
        with tempfile.TemporaryDirectory() as temp:
            results.append(await _measure(fleet, Path(temp), fastmcp))
        print(f"  measured {fleet.label}", file=sys.stderr)
    _report(results)
    print(f"\ntokens: anthropic-tokenizer {anthropic_tokenizer.vocab_size()}-entry BPE; "
          f"client context {CONTEXT_TOKENS:,} (serve --context-tokens)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000", help="synthetic fleet sizes, comma-separated")
    parser.add_argument("--per-server", type=int, default=250, help="tools per synthetic server")
    parser.add_argument("--no-fastmcp", dest="fastmcp", action="store_false")
    options = parser.parse_args()
    anyio.run(main, [int(s) for s in options.sizes.split(",") if s], options.per_server, options.fastmcp)
