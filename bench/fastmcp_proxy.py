"""FastMCP's proxy over an `MCPConfig` (`{"mcpServers": {...}}`), served over stdio or Streamable HTTP.

Two ways FastMCP's documentation builds a multi-server proxy:
- `config` (default): `create_proxy(MCPConfig)`. FastMCP builds a fresh backend client per request, and
  for a multi-server config that client mounts a fresh connection to every server, so each request
  starts every stdio upstream anew.
- `mount`: one `create_proxy` per server, mounted on one `FastMCP` under the server's name. A
  single-server backend keeps its stdio process alive between requests (over HTTP it still opens
  a new connection per request).
By default FastMCP gives each backend the era its own client negotiated, pinned: a 2026-era client
then reaches handshake-era upstreams (every real-fleet server) with requests they reject, and lists
no tools. `--backend-mode auto` lets each backend negotiate (FastMCP's advice for such backends).
Runs with `.bench-venv/fastmcp/bin/python` (made by `bench/setup.sh`), never in toolbridge's venv:
fastmcp pins its own `mcp`. Imports nothing from this repository.
Run: `.bench-venv/fastmcp/bin/python bench/fastmcp_proxy.py CONFIG.json [--http PORT] [--mode config|mount]
[--backend-mode auto]`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fastmcp import FastMCP
from fastmcp.mcp_config import MCPConfig
from fastmcp.server import create_proxy


def build(config: dict, mode: str, backend_mode: str | None) -> FastMCP:
    if mode == "config":
        return create_proxy(MCPConfig.from_dict(config), mode=backend_mode, name="fastmcp-proxy")
    gateway = FastMCP("fastmcp-proxy")
    for name, server in config["mcpServers"].items():
        single = MCPConfig.from_dict({"mcpServers": {name: server}})
        gateway.mount(create_proxy(single, mode=backend_mode, name=name), namespace=name)
    return gateway


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help='{"mcpServers": {...}} as Claude Desktop writes it')
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP at /mcp (default: stdio)")
    parser.add_argument("--mode", choices=["config", "mount"], default="config")
    parser.add_argument("--backend-mode", help="create_proxy(mode=...): default, the client's era pinned on the "
                        "backends; 'auto' for handshake-era upstreams, which fail under a pinned 2026 era")
    options = parser.parse_args()
    proxy = build(json.loads(options.config.read_text()), options.mode, options.backend_mode)
    if options.http:
        proxy.run(transport="http", host="127.0.0.1", port=options.http, path="/mcp", show_banner=False,
                  log_level="warning")
    else:
        proxy.run(transport="stdio", show_banner=False, log_level="warning")


if __name__ == "__main__":
    main()
