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
)
from proxy.config._models import (
    DEFAULT_REDIRECT_PORT,
    SERVER_NAME,
    AuditConfig,
    Config,
    Introspection,
    LargeResultsConfig,
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

__all__ = [
    "DEFAULT_REDIRECT_PORT",
    "SERVER_NAME",
    "AuditConfig",
    "Config",
    "Imported",
    "Introspection",
    "LargeResultsConfig",
    "MetricsConfig",
    "OAuthSettings",
    "ProfileConfig",
    "ResourceAuth",
    "ToolFilter",
    "ToolSearchSettings",
    "ToolsetConfig",
    "ToolsetsConfig",
    "UpstreamConfig",
    "convert_client_config",
    "holds_literal_secret",
    "import_client_config",
    "interpolate",
    "keep_last_good",
    "load_config",
    "load_toolsets",
    "load_upstream",
    "parse_tool_search",
    "reload_note",
]
