"""Controllable MCP servers that the fleet tests run as real stdio and HTTP upstreams."""
