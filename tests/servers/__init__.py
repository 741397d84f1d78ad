"""Controllable MCP servers that the fleet tests run as real stdio and HTTP upstreams, and the other processes
(Redis, nginx, replicas) that tests start (`cluster.py`)."""
