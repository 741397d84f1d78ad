"""Fleets of upstream servers for the listing and scale benchmarks, and the configs that serve them.

A fleet is data (server name → its tools in wire format); `write_fleet` turns it into one tools file
and one stdio command per server, which both toolbridge (`upstreams/*.yaml`) and FastMCP (an
`MCPConfig`) are then given, so the two proxies see exactly the same upstreams.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.harness import REPO

__all__ = [
    "CATALOGS",
    "Fleet",
    "real_fleet",
    "synthetic_fleet",
    "write_fleet",
    "write_mcp_config",
    "write_toolbridge_config",
]

CATALOGS = REPO.parent / "shared" / "catalogs"


@dataclass(frozen=True)
class Fleet:
    label: str
    servers: dict[str, list[dict[str, Any]]]

    @property
    def tool_count(self) -> int:
        return sum(len(tools) for tools in self.servers.values())


def real_fleet(catalog: Path = CATALOGS / "real-fleet.json") -> Fleet:
    """The 23 real servers (839 tools) exactly as they listed their tools."""
    servers = json.loads(catalog.read_text())["servers"]
    return Fleet("real-fleet", {name: entry["tools"] for name, entry in servers.items()})


def synthetic_fleet(tools: int, per_server: int = 500, catalog: Path = CATALOGS / "real-fleet.json",
                    distinct: bool = False) -> Fleet:
    """`tools` real tools, cycled through the real fleet and renamed `<server>_<tool>[_<copy>]`,
    `per_server` to a server (`syn000`, `syn001`, ...): real descriptions and schemas at any size.

    The copies repeat the real fleet's texts every 839 tools; with `distinct`, every tool's
    description and parameter descriptions end with its name, so no two tools share a text.
    """
    real = [(server, tool) for server, entry in json.loads(catalog.read_text())["servers"].items()
            for tool in entry["tools"]]
    servers: dict[str, list[dict[str, Any]]] = {}
    width = len(str(math.ceil(tools / per_server) - 1))
    for index in range(tools):
        server, tool = real[index % len(real)]
        copy = index // len(real)
        name = f"{server}_{tool['name']}" + (f"_{copy}" if copy else "")
        tool = _tagged(tool, name) if distinct else tool
        servers.setdefault(f"syn{index // per_server:0{max(3, width)}d}", []).append({**tool, "name": name})
    return Fleet(f"{'distinct' if distinct else 'synthetic'} {tools:,}", servers)


def _tagged(tool: dict[str, Any], tag: str) -> dict[str, Any]:
    """`tool` with ` [tag]` after its description and each top-level parameter's."""
    tool = copy.deepcopy(tool)
    tool["description"] = f"{tool.get('description') or ''} [{tag}]"
    for spec in (tool.get("inputSchema") or {}).get("properties", {}).values():
        if isinstance(spec, dict):
            spec["description"] = f"{spec.get('description') or ''} [{tag}]"
    return tool


def write_fleet(fleet: Fleet, directory: Path, sdk: bool = False) -> dict[str, list[str]]:
    """One tools file per server under `directory`; the stdio command serving each.

    `sdk`: serve with the MCP SDK (`bench/upstream.py`) instead of the standard-library server.
    """
    directory.mkdir(parents=True, exist_ok=True)
    commands = {}
    for name, tools in fleet.servers.items():
        path = directory / f"{name}.json"
        path.write_text(json.dumps(tools, ensure_ascii=False))
        if sdk:
            commands[name] = [sys.executable, str(REPO / "bench" / "upstream.py"), "--name", name, "--tools", str(path)]
        else:
            commands[name] = [sys.executable, str(REPO / "bench" / "catalog_upstream.py"), str(path)]
    return commands


def write_toolbridge_config(directory: Path, commands: dict[str, list[str]], startup_wait: float = 600,
                            connect_timeout: float = 600) -> Path:
    """A config dir with every server as an upstream, no core tools, and a first `tools/list`
    that waits for the whole fleet (so it measures the time until everything is listed)."""
    (directory / "upstreams").mkdir(parents=True)
    for name, command in commands.items():
        spec = {"command": command[0], "args": command[1:], "cwd": str(REPO), "connect_timeout": connect_timeout}
        (directory / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({"core": [], "startup_wait": startup_wait}))
    return directory


def write_mcp_config(path: Path, commands: dict[str, list[str]]) -> Path:
    """The same fleet as `{"mcpServers": ...}`, for FastMCP."""
    servers = {name: {"command": command[0], "args": command[1:], "cwd": str(REPO)}
               for name, command in commands.items()}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path
