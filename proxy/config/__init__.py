"""Configuration: the models, loading a config dir, and importing a client's MCP config.

Nothing here does network or process I/O; loading reads files and returns problems as values.
"""

from proxy.config._importer import Imported, convert_client_config, holds_literal_secret, import_client_config
from proxy.config._loading import (
    interpolate,
    keep_last_good,
    load_config,
    load_toolsets,
    load_upstream,
    parse_tool_search,
    reload_note,
    upstream_problem,
)
from proxy.config._models import (
    DEFAULT_REDIRECT_PORT,
    SERVER_NAME,
    AuditConfig,
    Config,
    Introspection,
    LargeResultsConfig,
    LimitRule,
    MetricsConfig,
    OAuthSettings,
    ProfileConfig,
    ResourceAuth,
    ToolFilter,
    ToolSearchSettings,
    ToolsetConfig,
    ToolsetsConfig,
    UpstreamConfig,
)
from proxy.config._nesting import SERVING, chain_marker, enter_chain, runs_toolbridge, serving_chain
from proxy.config._references import unknown_tools
from proxy.config._watching import on_file_changes

__all__ = [
    "DEFAULT_REDIRECT_PORT",
    "SERVER_NAME",
    "SERVING",
    "AuditConfig",
    "Config",
    "Imported",
    "Introspection",
    "LargeResultsConfig",
    "LimitRule",
    "MetricsConfig",
    "OAuthSettings",
    "ProfileConfig",
    "ResourceAuth",
    "ToolFilter",
    "ToolSearchSettings",
    "ToolsetConfig",
    "ToolsetsConfig",
    "UpstreamConfig",
    "chain_marker",
    "convert_client_config",
    "enter_chain",
    "holds_literal_secret",
    "import_client_config",
    "interpolate",
    "keep_last_good",
    "load_config",
    "load_toolsets",
    "load_upstream",
    "on_file_changes",
    "parse_tool_search",
    "reload_note",
    "runs_toolbridge",
    "serving_chain",
    "unknown_tools",
    "upstream_problem",
]
