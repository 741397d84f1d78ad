"""Toolset resolution: which tools a session may see, and which of them are core.

Pure functions over names: the registry's dynamic `mcp-<server>` toolsets and the configured
named toolsets go in, sets of qualified tool names come out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from proxy.config import ProfileConfig, ToolsetConfig
from proxy.names import TOOLSET_PREFIX, server_toolset

EVERYTHING = frozenset({"all", "*"})
_GLOB_CHARS = frozenset("*?[")


def match_names(patterns: Iterable[str], names: Collection[str]) -> frozenset[str]:
    """Names matching any pattern: exact names or shell-style globs."""
    matched: set[str] = set()
    for pattern in patterns:
        if _GLOB_CHARS.isdisjoint(pattern):
            if pattern in names:
                matched.add(pattern)
        else:
            matched.update(n for n in names if fnmatchcase(n, pattern))
    return frozenset(matched)


@dataclass(frozen=True)
class Toolsets:
    """The named toolsets from config plus the dynamic ones from the registry."""

    named: Mapping[str, ToolsetConfig]
    dynamic: Mapping[str, frozenset[str]]

    @property
    def all_tools(self) -> frozenset[str]:
        return frozenset().union(*self.dynamic.values())

    def _canonical(self, name: str) -> str:
        if name in self.named or name in self.dynamic:
            return name
        alias = server_toolset(name)
        return alias if alias in self.dynamic else name

    def resolve(self, names: Iterable[str]) -> frozenset[str]:
        """The qualified tool names in these toolsets, following `includes` recursively.

        One visited set is shared by the whole walk, so cycles and diamonds resolve once.
        Unknown toolset names contribute nothing.
        """
        return self._walk(names)[1]

    def visit(self, names: Iterable[str]) -> frozenset[str]:
        """Every toolset these names reach (canonical names), following `includes`."""
        return self._walk(names)[0]

    def _walk(self, names: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
        visited: set[str] = set()
        tools: set[str] = set()
        every = self.all_tools
        pending = list(names)
        while pending:
            name = pending.pop()
            if name in EVERYTHING:
                pending.extend(n for n in (*self.named, *self.dynamic) if n not in visited)
                continue
            name = self._canonical(name)
            if name in visited:
                continue
            visited.add(name)
            if name in self.dynamic:
                tools.update(self.dynamic[name])
            if name in self.named:
                toolset = self.named[name]
                tools.update(match_names(toolset.tools, every))
                pending.extend(toolset.includes)
        return frozenset(visited), frozenset(tools)


def session_scope(profile: ProfileConfig, toolsets: Toolsets) -> frozenset[str]:
    """Enabled toolsets minus disabled toolsets; subtraction always wins."""
    return toolsets.resolve(profile.toolsets) - toolsets.resolve(profile.disabled)


def split_core(scope: frozenset[str], core_patterns: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(core, deferred): core tools are called directly, everything else in scope is deferred."""
    core = match_names(core_patterns, scope)
    return core, scope - core if core else scope


def session_servers(profile: ProfileConfig, toolsets: Toolsets, tool_servers: Iterable[str]) -> frozenset[str]:
    """The servers in a session's scope: its `mcp-<server>` toolset is, or any of its tools is.

    `tool_servers` are the servers of the session's tools; the toolset side is enabled minus
    disabled, as for tools.
    """
    reached = toolsets.visit(profile.toolsets) - toolsets.visit(profile.disabled)
    named = {name.removeprefix(TOOLSET_PREFIX) for name in reached
             if name in toolsets.dynamic and name.startswith(TOOLSET_PREFIX)}
    return frozenset(named).union(tool_servers)
