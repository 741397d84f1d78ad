"""A stdio MCP server with a chosen catalog: N generated tools, or a server from a catalog JSON.

Every tool echoes its name and arguments (with `--structured`, its arguments as structured content
too); with `--calls-log FILE` each call appends one JSON line, so a test can prove that a call
reached the upstream exactly once (or never).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def generated_tools(count: int, prefix: str) -> list[types.Tool]:
    return [
        types.Tool(
            name=f"{prefix}_{i:04d}",
            description=f"Operation number {i} of the {prefix} service.",
            input_schema={"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]},
        )
        for i in range(count)
    ]


def catalog_tools(path: Path, server: str | None, copies: int) -> list[types.Tool]:
    """One server of a catalog file, or every server's tools renamed `<server><copy>_<tool>`."""
    servers = json.loads(path.read_text())["servers"]
    if server is not None:
        return [types.Tool.model_validate(t) for t in servers[server]["tools"]]
    return [
        types.Tool.model_validate({**t, "name": f"{name}{copy}_{t['name']}"})
        for copy in range(copies) for name, entry in sorted(servers.items()) for t in entry["tools"]
    ]


def build(tools: list[types.Tool], calls_log: Path | None, structured: bool = False) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        record = {"tool": params.name, "arguments": params.arguments or {}}
        if calls_log is not None:
            with calls_log.open("a") as log:
                log.write(json.dumps(record) + "\n")
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(record))],
                                    structured_content=record["arguments"] if structured else None)

    return Server("catalog", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--prefix", default="op")
    parser.add_argument("--catalog", type=Path, help="a catalog JSON (bench/catalogs format)")
    parser.add_argument("--server", help="which server of --catalog to serve (default: all of them)")
    parser.add_argument("--copies", type=int, default=1, help="serve --catalog this many times over")
    parser.add_argument("--calls-log", type=Path)
    parser.add_argument("--structured", action="store_true", help="return the arguments as structured content")
    parser.add_argument("--slow-start", type=float, default=0.0)
    args = parser.parse_args()
    tools = generated_tools(args.tools, args.prefix)
    if args.catalog:
        tools += catalog_tools(args.catalog, args.server, args.copies)
    time.sleep(args.slow_start)
    server = build(tools, args.calls_log, args.structured)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
