"""An SDK server that answers with the trace context its requests carried in `_meta`.

`echo` returns the request's `traceparent`/`tracestate`/`baggage` as JSON, `broken` answers with
`isError`, and `trace://meta` and the prompt `meta` read back the same JSON. In process (`build()`) or over stdio.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

CARRIER_KEYS = ("traceparent", "tracestate", "baggage")
META_URI = "trace://meta"


def _carried(ctx: Any) -> str:
    return json.dumps({key: ctx.meta[key] for key in CARRIER_KEYS if ctx.meta and key in ctx.meta})


def build() -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {}}
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema=schema),
                                            types.Tool(name="broken", input_schema=schema)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=_carried(ctx))],
                                    is_error=params.name == "broken")

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri=META_URI, name="meta")])

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def read(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text=_carried(ctx))])

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="meta")])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        text = types.TextContent(type="text", text=_carried(ctx))
        return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=text)])

    return Server("traced", on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read, on_list_prompts=list_prompts,
                  on_get_prompt=get_prompt)


def main() -> None:
    server = build()

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
