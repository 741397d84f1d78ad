"""Names in `toolsets.yaml` that point at nothing: a misspelt toolset or server empties a profile silently.

Toolset names (profile `toolsets`/`disabled`, toolset `includes`) must be `all`/`*`, a named toolset,
a server (its file stem in `upstreams/`) or `mcp-<server>`; a limit's `server` must be a server. Tool
names (`core`, toolset `tools`, a limit's `tool`) are
qualified `<server>__<tool>` names or globs: the server part must be a configured server. The tool
part is only known once the server has listed its tools, so it is not judged here.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from proxy.config._models import ToolsetsConfig
from proxy.config._yaml import line_of, read_yaml
from proxy.errors import ConfigError, DanglingName
from proxy.names import MAX_LENGTH, SEPARATOR, TOOLSET_PREFIX

__all__ = ["dangling_names", "unknown_tools"]

_EVERYTHING = frozenset({"all", "*"})
_GLOB_CHARS = "*?["
# A hashed long name keeps this much of `<server>__<tool>` before its digest (proxy/names.py).
_KEPT_PREFIX = MAX_LENGTH - 11


def _toolset_references(toolsets: ToolsetsConfig) -> Iterator[tuple[tuple[Any, ...], str]]:
    for name, profile in toolsets.profiles.items():
        for key in ("toolsets", "disabled"):
            for index, reference in enumerate(getattr(profile, key)):
                yield ("profiles", name, key, index), reference
    for name, toolset in toolsets.toolsets.items():
        for index, reference in enumerate(toolset.includes):
            yield ("toolsets", name, "includes", index), reference


def _tool_references(toolsets: ToolsetsConfig) -> Iterator[tuple[tuple[Any, ...], str]]:
    for index, pattern in enumerate(toolsets.core):
        yield ("core", index), pattern
    for name, toolset in toolsets.toolsets.items():
        for index, pattern in enumerate(toolset.tools):
            yield ("toolsets", name, "tools", index), pattern
    for name, rule in toolsets.limits.items():
        if rule.tool is not None:
            yield ("limits", name, "tool"), rule.tool


def _names_a_server(pattern: str, servers: Collection[str], raw_names: bool) -> bool:
    """Whether a tool name or glob can match a tool of a configured server."""
    literal = pattern
    for char in _GLOB_CHARS:
        literal = literal.split(char, 1)[0]
    if literal != pattern and SEPARATOR not in literal:
        return True  # `*`, `time_*`: too open to judge
    if any(literal.startswith((server + SEPARATOR)[:_KEPT_PREFIX]) for server in servers):
        return True
    return raw_names  # a `prefix: false` server's tools keep their own names


def _unknown(toolsets: ToolsetsConfig, servers: Collection[str], raw_names: bool) -> list[tuple[tuple[Any, ...], str]]:
    known = {*_EVERYTHING, *toolsets.toolsets, *servers, *(TOOLSET_PREFIX + server for server in servers)}
    hint = _hint(toolsets, servers)
    found = [(where, f"unknown toolset {name!r}{hint}") for where, name in _toolset_references(toolsets)
             if name not in known]
    found += [(where, f"{pattern!r} names no configured server (a tool is `<server>__<tool>`)")
              for where, pattern in _tool_references(toolsets) if not _names_a_server(pattern, servers, raw_names)]
    found += [(("limits", name, "server"), f"unknown server {rule.server!r}{_server_hint(servers)}")
              for name, rule in toolsets.limits.items() if rule.server is not None and rule.server not in servers]
    return found


def _server_hint(servers: Collection[str]) -> str:
    return f"; known: {', '.join(sorted(servers))}" if servers else "; no servers are configured"


def _hint(toolsets: ToolsetsConfig, servers: Collection[str]) -> str:
    names = sorted({*toolsets.toolsets, *servers})
    return f"; known: all, {', '.join(names)}" if names else "; no toolsets or servers are configured"


def dangling_names(path: Path, toolsets: ToolsetsConfig, servers: Collection[str],
                   raw_names: bool = False) -> list[ConfigError]:
    """One problem per name in `toolsets.yaml` that resolves to nothing, with its line.

    `servers` are the configured server names (every upstream file's stem, loaded or not: a broken
    file is reported on its own); `raw_names` is whether any server keeps unprefixed tool names.
    """
    return _located(path, _unknown(toolsets, servers, raw_names))


def _located(path: Path, found: list[tuple[tuple[Any, ...], str]]) -> list[ConfigError]:
    if not found:
        return []
    try:
        _, node = read_yaml(path)
    except ConfigError:
        node = None
    return [DanglingName(str(path), f"{'.'.join(map(str, where))}: {reason}", line_of(node, where))
            for where, reason in found]


def _unmatched(pattern: str, known: Mapping[str, Collection[str]]) -> str | None:
    """Why `pattern` matches no tool of the known server its name starts with, or None when it matches
    one, or names no server whose tools are known."""
    servers = [server for server in known if pattern.startswith(server + SEPARATOR)]
    if not servers:
        return None
    server = max(servers, key=len)
    names = known[server]
    if any(fnmatchcase(name, pattern) for name in names):
        return None
    close = [] if any(char in pattern for char in _GLOB_CHARS) else difflib.get_close_matches(pattern, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{pattern!r} names no tool of server {server} ({len(names)} tools){hint}"


def unknown_tools(path: Path, toolsets: ToolsetsConfig, known: Mapping[str, Collection[str]]) -> list[ConfigError]:
    """One problem per `core` or toolset `tools` entry that names a server whose tools are known, yet matches
    none of them (a misspelt core tool with a correct prefix would otherwise be silently absent).

    `known` maps a server to its qualified tool names; servers whose tools are not known are not judged.
    """
    found = [(where, reason) for where, pattern in _tool_references(toolsets)
             if (reason := _unmatched(pattern, known)) is not None]
    return _located(path, found)
