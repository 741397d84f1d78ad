"""An in-process gateway for fast tests: real SDK upstream servers over memory, the real registry,
views and downstream server. Only the fleet's supervision is left out (tested on its own)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import Client, types
from mcp.server.lowlevel import Server

from proxy.config import ToolsetsConfig
from proxy.downstream import ChangeNotifier, Handlers, build_server
from proxy.registry import Registry
from proxy.upstream import ProgressCallback
from proxy.views import Views


def tool(name: str, description: str = "", properties: dict[str, Any] | None = None,
         required: list[str] | None = None) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    return types.Tool(name=name, description=description, input_schema=schema)


@dataclass
class Upstream:
    """A real lowlevel SDK server whose tools echo their arguments and count their calls."""

    name: str
    tools: list[types.Tool]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self.tools)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            self.calls.append((params.name, dict(params.arguments or {})))
            text = f"{self.name}.{params.name} {sorted((params.arguments or {}).items())}"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

        return Server(self.name, on_list_tools=list_tools, on_call_tool=call_tool)


class ClientCaller:
    """Routes calls to in-memory upstream clients, as the fleet does to live connections."""

    def __init__(self, clients: dict[str, Client]) -> None:
        self.clients = clients

    async def call_tool(self, server: str, raw_name: str, arguments: dict[str, Any],
                        progress_callback: ProgressCallback | None = None) -> types.CallToolResult:
        return await self.clients[server].call_tool(raw_name, arguments, progress_callback=progress_callback)


@dataclass
class Harness:
    registry: Registry
    views: Views
    notifier: ChangeNotifier
    server: Server[Any]
    upstreams: dict[str, Upstream]

    async def refresh(self, name: str) -> None:
        """Re-register an upstream's current tools, as the fleet does on list_changed."""
        self.registry.set_server_tools(name, self.upstreams[name].tools)


@asynccontextmanager
async def gateway(
    upstreams: list[Upstream],
    toolsets: ToolsetsConfig | None = None,
    *,
    available: Callable[[str], bool] = lambda server: True,
    profile: str | None = None,
) -> AsyncIterator[Harness]:
    registry = Registry()
    async with AsyncExitStack() as stack:
        clients = {}
        for upstream in upstreams:
            clients[upstream.name] = await stack.enter_async_context(Client(upstream.server(), mode="legacy"))
            registry.set_server_tools(upstream.name, (await clients[upstream.name].list_tools()).tools)
        views = Views(registry, toolsets or ToolsetsConfig(), available)
        ready = anyio.Event()
        ready.set()
        notifier = ChangeNotifier(views)
        handlers = Handlers(views, ClientCaller(clients), notifier, fleet_ready=ready, startup_wait=0,
                            profile=profile)
        async with anyio.create_task_group() as tg:
            await tg.start(notifier.run)
            yield Harness(registry, views, notifier, build_server(handlers), {u.name: u for u in upstreams})
            tg.cancel_scope.cancel()
