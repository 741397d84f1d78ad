"""The SDK's lowlevel `Server` around toolbridge's handlers: what it announces and which middleware it runs."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from mcp import MCPDeprecationWarning
from mcp.server.lowlevel import NotificationOptions, Server
from opentelemetry import trace

from proxy import __version__
from proxy.downstream._server import Handlers
from proxy.downstream.calls import TaskIdParams, TaskUpdateParams
from proxy.downstream.lists import ExtensionsAdvertiser
from proxy.downstream.session import ConnectionId, RequestContext, TraceContext
from proxy.protocol import TASKS


class _AnnouncingServer(Server[Any]):
    """Advertise `listChanged` for tools, prompts and resources to handshake-era clients on every transport.

    The SDK's HTTP and in-memory paths build initialization options with no notification options,
    which would tell those clients that our lists never change.
    """

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        options = notification_options or NotificationOptions(
            tools_changed=True, prompts_changed=True, resources_changed=True)
        return super().create_initialization_options(options, *args, **kwargs)


def tracing() -> bool:
    """Whether an OpenTelemetry tracer provider is installed (in code, or by `OTEL_PYTHON_TRACER_PROVIDER`)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


P = TypeVar("P")
R = TypeVar("R")


def _in_profile(
    handlers: Handlers, answer: Callable[[RequestContext, str, P], Awaitable[R]]
) -> Callable[[RequestContext, P], Awaitable[R]]:
    """A `tasks/*` handler given the profile its request is in: a task is bound to the profile it was made in."""

    async def handler(ctx: RequestContext, params: P) -> R:
        return await answer(ctx, handlers.profile_of(ctx), params)

    return handler


def build_server(handlers: Handlers) -> Server[Any]:
    """The SDK server that answers downstream clients with `handlers`.

    The SDK wraps every request in an OpenTelemetry span by default; with no tracer provider
    installed when the server is built, those spans record nothing and only cost CPU on every
    call, so that middleware is dropped (the way the SDK documents to opt out). `TraceContext` runs
    outermost either way, so the downstream's trace context reaches the upstream.
    """

    @asynccontextmanager
    async def per_connection(_server: Server[Any]) -> AsyncIterator[ConnectionId]:
        connection = ConnectionId()
        try:
            yield connection
        finally:
            handlers.forget(connection)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging/setLevel is handshake-era, and served
        server = _AnnouncingServer(
            "toolbridge",
            version=__version__,
            instructions="Tools from many MCP servers. Use tool_search to find deferred tools.",
            lifespan=per_connection,
            on_list_tools=handlers.list_tools,
            on_call_tool=handlers.calls.call_tool,
            on_list_resources=handlers.list_resources,
            on_list_resource_templates=handlers.resources.templates,
            on_read_resource=handlers.read_resource,
            on_subscribe_resource=handlers.resources.subscribe,
            on_unsubscribe_resource=handlers.resources.unsubscribe,
            on_list_prompts=handlers.list_prompts,
            on_get_prompt=handlers.prompts.get,
            on_completion=handlers.prompts.complete,
            on_set_logging_level=handlers.set_logging_level,
            on_subscriptions_listen=handlers.streams.listen,
        )
    server.extensions[TASKS] = {}
    server.add_request_handler("tasks/get", TaskIdParams, _in_profile(handlers, handlers.tasks.get))
    server.add_request_handler("tasks/update", TaskUpdateParams, _in_profile(handlers, handlers.tasks.update))
    server.add_request_handler("tasks/cancel", TaskIdParams, _in_profile(handlers, handlers.tasks.cancel))
    if not tracing():
        server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    server.middleware.append(ExtensionsAdvertiser(handlers.view_of))
    server.middleware.insert(0, TraceContext())
    return server
