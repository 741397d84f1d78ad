"""The upstream every proxy in the overhead benchmark talks to: a small MCP SDK server, over stdio
or Streamable HTTP.

Its tools answer at once with their arguments echoed back, so what a benchmark times is transport
and proxy, never the tool. `echo` and `echo_deferred` are the same tool under two names, so one
toolbridge config can make the first a core tool and leave the second behind `tool_call`. With
`--tools FILE` it serves that JSON list of tools instead (a real SDK server for fleet benchmarks).
Run: `python -m bench.upstream [--http PORT] [--name NAME] [--tools FILE]`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

ECHO_SCHEMA = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
TOOLS = [
    types.Tool(name="echo", description="Echo the arguments back.", input_schema=ECHO_SCHEMA),
    types.Tool(name="echo_deferred", description="Echo the arguments back (reached through tool_call).",
               input_schema=ECHO_SCHEMA),
]


def build(name: str, tools: list[types.Tool]) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(params.arguments))])

    schemas = {tool.name: tool.input_schema for tool in tools}
    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool, get_tool_input_schema=schemas.get)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP at /mcp (default: stdio)")
    parser.add_argument("--name", default="echo")
    parser.add_argument("--tools", type=Path, help="serve this JSON list of wire-format tools instead")
    options = parser.parse_args()
    tools = TOOLS
    if options.tools:
        tools = [types.Tool.model_validate(tool) for tool in json.loads(options.tools.read_text())]
    server = build(options.name, tools)
    if options.http:
        import uvicorn  # only here: a stdio upstream should not pay for importing it

        app = server.streamable_http_app(streamable_http_path="/mcp")
        uvicorn.run(app, host="127.0.0.1", port=options.http, log_level="warning")
        return

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
