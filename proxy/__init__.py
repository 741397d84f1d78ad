"""toolbridge: one MCP endpoint in front of many upstream MCP servers."""

__version__ = "0.1.0"
