"""An upstream with subscribable resources (`item://{id}`) in both eras, run as a stdio subprocess.

A 2026-era client subscribes in its `subscriptions/listen` filter, a handshake-era one with
`resources/subscribe`. Tools let a test publish an update of a URI to whoever subscribed to it
(`update`), add a tool without telling anyone (`quietly_add`), and see what its client asks for
(`asked`: the filter of the latest listen stream, the filters of the open ones, the handshake-era
subscriptions, how many listen streams were opened, and its pid). With `--honor URI`, a listen
stream is acknowledged for the URIs so named only.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated

TOOLS = [
    types.Tool(name="update", description="Publish an update of `uri`.",
               input_schema={"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]}),
    types.Tool(name="asked", description="What the client subscribed to, as JSON.", input_schema={"type": "object"}),
    types.Tool(name="quietly_add", description="Add a tool named `name` and announce nothing.",
               input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
]


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def build_server(honor: frozenset[str] | None = None) -> Server[Any]:
    tools = list(TOOLS)
    bus = InMemorySubscriptionBus()
    handler = ListenHandler(bus)
    latest: list[str] | None = None
    listens = 0
    streams: dict[object, list[str]] = {}
    subscribed: dict[str, Any] = {}  # handshake era: URI -> the session that subscribed

    async def listen(ctx: Any, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        nonlocal latest, listens
        latest = list(params.notifications.resource_subscriptions or [])
        listens += 1
        token = object()
        streams[token] = latest
        if honor is not None:
            taken = [uri for uri in latest if uri in honor] or None
            params = params.model_copy(update={
                "notifications": params.notifications.model_copy(update={"resource_subscriptions": taken})})
        try:
            return await handler(ctx, params)
        finally:
            del streams[token]

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscribed[params.uri] = ctx.session
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscribed.pop(params.uri, None)
        return types.EmptyResult()

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "update":
            uri = str((params.arguments or {})["uri"])
            await bus.publish(ResourceUpdated(uri=uri))
            if uri in subscribed:
                await subscribed[uri].send_resource_updated(uri)
            return _text("ok")
        if params.name == "asked":
            return _text(json.dumps({"latest": latest, "open": sorted(streams.values()),
                                     "subscribed": sorted(subscribed), "listens": listens,
                                     "pid": os.getpid()}))
        tools.append(types.Tool(name=str((params.arguments or {})["name"]), input_schema={"type": "object"}))
        return _text("ok")

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[types.ResourceTemplate(uri_template="item://{id}", name="item")])

    async def read(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text="item")])

    return Server("subscribable", on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_list_resource_templates=list_templates,
                  on_read_resource=read, on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe,
                  on_subscriptions_listen=listen)


async def _serve(server: Server[Any]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--honor", action="append", help="acknowledge a listen stream for this URI only")
    options = parser.parse_args()
    anyio.run(_serve, build_server(frozenset(options.honor) if options.honor else None))
