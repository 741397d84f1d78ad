"""An upstream whose lists carry the cache hints it is told (`ttlMs`, `cacheScope`, 2026-07-28), and
which advertises the extensions it is told. In-process with `build()`, or over stdio:
`python cached_lists.py NAME TTL_MS SCOPE [EXTENSION...]`.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

Scope = Literal["public", "private"]


def build(name: str, ttl_ms: int, scope: Scope, extensions: tuple[str, ...] = ()) -> Server[Any]:
    """One tool, one resource and one prompt, each list with the given hint."""
    hint: dict[str, Any] = {"ttl_ms": ttl_ms, "cache_scope": scope}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        tool = types.Tool(name=f"{name}_tool", description="A tool.", input_schema={"type": "object"})
        return types.ListToolsResult(tools=[tool], **hint)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=name)])

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(name="r", uri=f"test://{name}/r")], **hint)

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[], **hint)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name=f"{name}_prompt")], **hint)

    server = Server(name, on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                    on_list_resource_templates=list_templates, on_list_prompts=list_prompts)
    server.extensions.update({identifier: {} for identifier in extensions})
    return server


async def _serve(server: Server[Any]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    label, ttl, scope, *ids = sys.argv[1:]
    assert scope in ("public", "private")
    anyio.run(_serve, build(label, int(ttl), scope, tuple(ids)))  # type: ignore[arg-type]
