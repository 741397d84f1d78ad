"""Mistakes the config files cannot show by themselves, which would otherwise be silent: a stdio command
that is not installed (the server is parked, the catalog just shorter) and a core or toolset tool name
with a right prefix and a wrong tool (the profile just has one tool fewer).

`check` judges tool names by each server's cached catalog (what it listed when it last connected);
`catalog` by the tools the servers list now.
"""

from __future__ import annotations

import sys
from pathlib import Path

from proxy.app import Gateway, cache_dir
from proxy.config import Config, unknown_tools, upstream_problem
from proxy.errors import ConfigError
from proxy.names import qualify_names
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


def _cached_tools(config: Config) -> dict[str, list[str]]:
    """Qualified tool names by server, for the prefixed servers with a cached catalog."""
    cache = DiskCatalogCache(cache_dir(config) / "catalogs")
    known: dict[str, list[str]] = {}
    for upstream in config.upstreams.values():
        if upstream.prefix and (tools := cache.load(upstream)) is not None:
            known[upstream.name] = list(qualify_names(upstream.name, [tool.name for tool in tools]).values())
    return known


def check_problems(config: Config) -> list[ConfigError]:
    """What `check` reports besides the loading problems."""
    toolsets = config.directory / "toolsets.yaml"
    return [*_missing_commands(config), *unknown_tools(toolsets, config.toolsets, _cached_tools(config))]


def fleet_problems(gateway: Gateway) -> list[str]:
    """The servers that did not list their tools, and tool names that none of a listed server's tools match."""
    config = gateway.config
    failed = [f"server {status.name} is {status.state.value}: {status.last_error or status.reason}"
              for status in gateway.fleet.status() if status.state in _FAILED]
    known = {server: list(gateway.registry.server_tools(server)) for server in gateway.registry.servers
             if server in config.upstreams and config.upstreams[server].prefix}
    unknown = unknown_tools(config.directory / "toolsets.yaml", config.toolsets, known)
    return [*failed, *map(str, unknown)]
