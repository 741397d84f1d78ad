"""An in-process gateway for fast tests: real SDK upstream servers over memory, the real registry,
views and downstream server. Only the fleet's supervision is left out (tested on its own)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from mcp import Client, types
from mcp.server.lowlevel import Server

from proxy.catalogs import Catalogs
from proxy.config import ToolsetsConfig
from proxy.downstream import ChangeNotifier, Handlers, LargeResults, build_server
from proxy.protocol import BackChannel, CacheHint, ListKind, Notice, NoticeSink, ProgressCallback, ServerTraits
from proxy.registry import Registry
from proxy.replicated import Limits, MemoryResultStore
from proxy.upstream import InFlight, client_callbacks
from proxy.views import Views

T = TypeVar("T")


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

    def __init__(self) -> None:
        self.clients: dict[str, Client] = {}
        self.in_flight: dict[str, InFlight] = {}

    def client(self, server: Server[Any], name: str, mode: str, notices: NoticeSink) -> Client:
        """An upstream client whose server→client requests find their caller and whose resource updates
        reach `notices`, as the fleet's do."""
        self.in_flight[name] = InFlight()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                await notices(name, message)

        return Client(server, mode=mode, log_level="debug", message_handler=on_message,
                      **client_callbacks(name, self.in_flight[name], _unclaimed))

    async def call_tool(self, server: str, raw_name: str, arguments: dict[str, Any],
                        progress_callback: ProgressCallback | None = None,
                        channel: BackChannel | None = None) -> types.CallToolResult:
        async with self.in_flight[server].call(channel):
            return await self.clients[server].call_tool(raw_name, arguments, progress_callback=progress_callback)

    async def request(self, server: str, what: str, operation: Callable[[Client], Awaitable[T]],
                      channel: BackChannel | None = None) -> T:
        async with self.in_flight[server].call(channel):
            return await operation(self.clients[server])

    async def subscribe(self, server: str, uris: Sequence[str]) -> None:
        """Handshake-era upstreams only; the fleet's own subscriptions are tested in test_resource_updates_2026."""
        for uri in uris:
            await self.clients[server].subscribe_resource(uri)

    def unsubscribe(self, server: str, uri: str) -> None:
        """Nothing to tell: the harness's upstreams keep updating, and toolbridge drops what nobody wants."""

    def logs(self, server: str) -> bool:
        return self.clients[server].server_capabilities.logging is not None


async def _unclaimed(server: str, notification: types.ServerNotification) -> None:
    await anyio.lowlevel.checkpoint()


@dataclass
class Harness:
    registry: Registry
    views: Views
    notifier: ChangeNotifier
    server: Server[Any]
    upstreams: dict[str, Upstream]
    handlers: Handlers

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
    servers: dict[str, Server[Any]] | None = None,
    mode: str = "legacy",
) -> AsyncIterator[Harness]:
    """The gateway over `upstreams` (tools only) and `servers` (any SDK servers, tools, resources
    and prompts alike, connected in `mode`)."""
    registry = Registry()
    catalogs = Catalogs(registry)
    caller = ClientCaller()
    every = {**{u.name: u.server() for u in upstreams}, **(servers or {})}
    send_notice, notices = anyio.create_memory_object_stream[Notice](100)

    async def notice(server: str, notification: types.ServerNotification) -> None:
        await send_notice.send((server, notification))

    async with AsyncExitStack() as stack:
        stack.enter_context(notices)
        stack.enter_context(send_notice)  # closed first: the handlers' delivery ends quietly
        for name, server in every.items():
            client = await stack.enter_async_context(caller.client(server, name, "legacy" if name not in (
                servers or {}) else mode, notice))
            caller.clients[name] = client
            listed = await client.list_tools()
            registry.set_server_tools(name, listed.tools)
            if name in (servers or {}):
                await _register_catalog(catalogs, name, client, listed)
        views = Views(registry, toolsets or ToolsetsConfig(), available, catalogs=catalogs)
        ready = anyio.Event()
        ready.set()
        notifier = ChangeNotifier(views)
        large = LargeResults(MemoryResultStore(ttl=60, max_chars=10_000_000), views.toolsets.large_results.max_chars)
        handlers = Handlers(views, caller, notifier, fleet_ready=ready, startup_wait=0, profile=profile,
                            large_results=large, notices=notices, limits=Limits(views.toolsets.limits))
        async with anyio.create_task_group() as tg:
            await tg.start(notifier.run)
            await tg.start(handlers.run)
            yield Harness(registry, views, notifier, build_server(handlers), {u.name: u for u in upstreams}, handlers)
            tg.cancel_scope.cancel()


async def _register_catalog(catalogs: Catalogs, name: str, client: Client, tools: types.ListToolsResult) -> None:
    """The server's catalog, its advertised extensions and its lists' cache hints, as the fleet records them."""
    capabilities = client.server_capabilities
    lists: dict[ListKind, Any] = {"tools": tools}
    if capabilities.resources:
        lists["resources"] = await client.list_resources()
        lists["templates"] = await client.list_resource_templates()
    if capabilities.prompts:
        lists["prompts"] = await client.list_prompts()
    catalogs.set_server_catalog(name, lists["resources"].resources if "resources" in lists else [],
                                lists["templates"].resource_templates if "templates" in lists else [],
                                lists["prompts"].prompts if "prompts" in lists else [])
    hints = {kind: CacheHint.of(result) for kind, result in lists.items()}
    catalogs.set_server_traits(name, ServerTraits(capabilities.extensions or {}, hints))


class Inbox:
    """The resource updates one downstream client received, in order (its `message_handler`)."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._arrived = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self._arrived.set()
            self._arrived = anyio.Event()

    async def receive(self, uri: str, times: int = 1) -> None:
        with anyio.fail_after(10):
            while self.uris.count(uri) < times:
                await self._arrived.wait()
