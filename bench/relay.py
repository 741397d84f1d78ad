"""The floor for any Python MCP proxy: an SDK `Server` that forwards `tools/list` and `tools/call` to
one upstream `Client`, and does nothing else (no registry, names, scope or validation).

What toolbridge costs above this relay is toolbridge's own; the rest is the extra hop through the
SDK on both sides. Run: `python -m bench.relay [--http PORT] (--url URL | --command ARG...)`.
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import uvicorn
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def build(upstream: Client) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return await upstream.list_tools()

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await upstream.call_tool(params.name, params.arguments)

    return Server("relay", on_list_tools=list_tools, on_call_tool=call_tool, get_tool_input_schema=lambda _: None)


async def serve(options: argparse.Namespace) -> None:
    if options.url:
        target: Any = streamable_http_client(options.url)
    else:
        target = stdio_client(StdioServerParameters(command=options.command[0], args=options.command[1:]))
    async with Client(target) as upstream:
        server = build(upstream)
        if options.http:
            app = server.streamable_http_app(streamable_http_path="/mcp")
            config = uvicorn.Config(app, host="127.0.0.1", port=options.http, log_level="warning")
            await uvicorn.Server(config).serve()
        else:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP at /mcp (default: stdio)")
    upstream = parser.add_mutually_exclusive_group(required=True)
    upstream.add_argument("--url", help="the upstream's Streamable HTTP endpoint")
    upstream.add_argument("--command", nargs=argparse.REMAINDER, help="the upstream's stdio command line")
    anyio.run(serve, parser.parse_args())


if __name__ == "__main__":
    main()
