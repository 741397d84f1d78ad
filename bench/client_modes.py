"""What a client that defers MCP tools (Claude Code) carries at turn 1 and after using five tools,
per exposure mode, on the real-fleet catalog and on the bundled fleet.

    .venv/bin/python -m bench.client_modes            # real fleet (bench/catalogs) and the bundled fleet

Tokens are the spec's estimate (characters / 4) of what enters the model's context:
- bridge (`exposure: bridge`, always loaded): the whole `tools/list` toolbridge sends (core tools,
  the three bridge tools, the listing); using a tool first costs its `tool_describe` schema;
- bridge + `promote: 5`: the same, the five used tools' schemas now listed directly (the listing
  gives up what they take);
- direct, client defers: every tool is listed, the client shows the model only names until it
  loads a schema (counted as one `name` line per tool; Claude Code's own index may add descriptions);
- direct, client does not defer: every schema at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import anyio
from mcp import types

from bench.search_eval import build_catalog, catalogs_dir, load_servers
from proxy.config import ProfileConfig, ToolsetsConfig, load_config
from proxy.listing import estimate_tokens
from proxy.views import Views

REPO = Path(__file__).resolve().parent.parent
USED = 5


def wire(tools: Iterable[types.Tool]) -> str:
    return json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools])


def modes(views: Views, used: list[str]) -> dict[str, tuple[int, int]]:
    """Per mode: (tokens at turn 1, tokens after using `used`)."""
    view = views.for_profile("default")
    tools = views.registry.tools
    turn1 = estimate_tokens(wire(view.surface.tools))
    schemas = estimate_tokens(wire(tools[n].tool for n in used))
    promoted, _ = views.session_surface(view, views.promotable(view, used))
    every = [tools[n].tool for n in sorted(view.scope)]
    names = estimate_tokens("\n".join(t.name for t in every))
    return {
        "bridge (always loaded)": (turn1, turn1 + schemas),
        f"bridge + promote: {USED}": (turn1, estimate_tokens(wire(promoted.tools))),
        "direct, client defers": (names, names + schemas),
        "direct, client does not defer": (estimate_tokens(wire(every)),) * 2,
    }


def real_fleet() -> tuple[Views, list[str]]:
    views = build_catalog(load_servers(catalogs_dir() / "real-fleet.json"))
    profile = ProfileConfig(context_tokens=200_000, promote=USED)
    views.update_toolsets(ToolsetsConfig(profiles={"default": profile}))
    queries = json.loads((catalogs_dir() / "queries-dev.json").read_text())
    used = list(dict.fromkeys(gold for query in queries for gold in query["gold"]))[:USED]
    return views, used


async def bundled_fleet() -> None:
    """The bundled fleet in `upstreams/`, connected for real (needs scripts/setup.sh)."""
    from proxy.app import run_gateway

    config = load_config(REPO)
    config.toolsets = ToolsetsConfig(core=config.toolsets.core, profiles={
        "default": ProfileConfig(context_tokens=200_000, promote=USED)})
    async with run_gateway(config, log_dir=REPO / "logs") as gateway:
        await gateway.wait_until_ready(60)
        view = gateway.views.for_profile("default")
        report("bundled fleet", gateway.views, sorted(view.deferred)[:USED])


def report(title: str, views: Views, used: list[str]) -> None:
    view = views.for_profile("default")
    print(f"\n{title}: {len(view.scope)} tools in scope, 200K context, listing budget {view.surface.budget}")
    print(f"{'mode':<32} {'turn 1':>9} {'after 5 tools':>14}")
    for mode, (first, after) in modes(views, used).items():
        print(f"{mode:<32} {first:>9,} {after:>14,}")


def main() -> None:
    report("real fleet", *real_fleet())
    anyio.run(bundled_fleet)


if __name__ == "__main__":
    main()
