"""Mistakes the config files cannot show by themselves, which would otherwise be silent: a stdio command
that is not installed (the server is parked, the catalog just shorter), a core or toolset tool name
with a right prefix and a wrong tool (the profile just has one tool fewer), and an override that cannot
apply (a rename that clashes, a tool or parameter the server lacks, a required parameter hidden with no
default).

`check` judges tool names by each server's cached catalog (what it listed when it last connected);
`catalog` by the tools the servers list now.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from proxy.app import Gateway, cache_dir
from proxy.config import Config, unknown_tools, upstream_problem
from proxy.errors import ConfigError
from proxy.names import qualify_names
from proxy.overrides import override_findings, shown_names
from proxy.upstream import DiskCatalogCache, UpstreamState, resolve_command

__all__ = ["check_problems", "fleet_problems"]

_FAILED = (UpstreamState.STARTING, UpstreamState.BACKOFF, UpstreamState.PARKED, UpstreamState.NEEDS_AUTH)


def _missing_commands(config: Config) -> list[ConfigError]:
    """Each enabled stdio upstream whose command `serve` would not find (the same lookup it makes)."""
    where = Path(sys.executable).parent
    return [upstream_problem(config.directory, upstream.name, "command",
                             f"{upstream.command!r} is not on PATH (nor in {where}); install it, or give its "
                             "absolute path")
            for upstream in config.upstreams.values()
            if upstream.enabled and upstream.command is not None and resolve_command(upstream.command) is None]


def _cached_catalogs(config: Config) -> dict[str, dict[str, dict[str, Any]]]:
    """Each server's cached catalog (from its last connection): raw tool name → input schema."""
    cache = DiskCatalogCache(cache_dir(config) / "catalogs")
    return {upstream.name: {tool.name: tool.input_schema for tool in tools} for upstream in config.upstreams.values()
            if (tools := cache.load(upstream)) is not None}


def _qualified(config: Config, catalogs: Mapping[str, Collection[str]]) -> dict[str, list[str]]:
    """Qualified tool names by server, for the prefixed servers whose raw tool names are known, as their
    overrides name them."""
    known: dict[str, list[str]] = {}
    for server, raw_names in catalogs.items():
        upstream = config.upstreams[server]
        if upstream.prefix:
            shown, _ = shown_names(raw_names, upstream.overrides)
            known[server] = list(qualify_names(server, shown.values()).values())
    return known


def _override_problems(config: Config, catalogs: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[ConfigError]:
    """Overrides that would not apply as written, judged against each server's tools where they are known."""
    return [upstream_problem(config.directory, upstream.name, where, reason)
            for upstream in config.upstreams.values()
            for where, reason in override_findings(upstream.name, upstream.prefix, upstream.overrides,
                                                   catalogs.get(upstream.name))]


def check_problems(config: Config) -> list[ConfigError]:
    """What `check` reports besides the loading problems."""
    toolsets = config.directory / "toolsets.yaml"
    catalogs = _cached_catalogs(config)
    return [*_missing_commands(config), *_override_problems(config, catalogs),
            *unknown_tools(toolsets, config.toolsets, _qualified(config, catalogs))]


def fleet_problems(gateway: Gateway) -> list[str]:
    """The servers that did not list their tools, overrides that do not apply to what they listed, and tool
    names that none of a listed server's tools match."""
    config = gateway.config
    failed = [f"server {status.name} is {status.state.value}: {status.last_error or status.reason}"
              for status in gateway.fleet.status() if status.state in _FAILED]
    listed = {server: {raw: entry.input_schema for raw, entry in gateway.registry.listed_tools(server).items()}
              for server in gateway.registry.servers if server in config.upstreams}
    known = {server: list(gateway.registry.server_tools(server)) for server in gateway.registry.servers
             if server in config.upstreams and config.upstreams[server].prefix}
    unknown = unknown_tools(config.directory / "toolsets.yaml", config.toolsets, known)
    return [*failed, *map(str, _override_problems(config, listed)), *map(str, unknown)]
