"""A controllable upstream MCP server for the fleet tests.

Run as a stdio subprocess (`python -m servers.controllable [flags]` or by path) or build the
Starlette app with `http_app()` for uvicorn. Tools let a test add, remove and change tools (each
announced with list_changed in both eras), sleep with progress, count cancelled handlers, and
return structured content that breaks its own output schema.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

PAGE_SIZE = 5
_OBJECT = {"type": "object"}


def _tool(tool_name: str, description: str = "", /, **properties: Any) -> types.Tool:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}
    return types.Tool(name=tool_name, description=description, input_schema=schema)


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


class _Notifying(Server):
    """Advertises legacy `tools.listChanged` on every transport (HTTP apps pass no options)."""

    def create_initialization_options(self, notification_options=None, *args: Any, **kwargs: Any):  # type: ignore[override]
        options = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(options, *args, **kwargs)


class State:
    """The server's mutable tool table and counters."""

    def __init__(self, extra_tools: int = 0, *, storm: bool = False) -> None:
        self.tools: dict[str, types.Tool] = {
            t.name: t
            for t in (
                _tool("echo", "Echo the text back.", text="string"),
                _tool("add_tool", "Add a tool and announce it.", name="string"),
                _tool("remove_tool", "Remove a tool and announce it.", name="string"),
                _tool("change_tool", "Change a tool's description and announce it.",
                      name="string", description="string"),
                _tool("burst", "Add several tools, one list_changed each.", count="integer"),
                _tool("sleep", "Sleep, reporting progress every step; done early once the file `until` exists.",
                      seconds="number", steps="integer", until="string"),
                _tool("big", "Return a text of `size` characters.", size="integer"),
                _tool("block", "Block the whole server (a synchronous sleep).", seconds="number"),
                _tool("cancelled_count", "How many sleep handlers were cancelled."),
                _tool("pid", "The server's process id."),
                _tool("environment", "The server's working directory and environment, as JSON."),
                types.Tool(name="bad_structured", description="Breaks its own output schema.",
                           input_schema=_OBJECT,
                           output_schema={"type": "object", "properties": {"n": {"type": "integer"}},
                                          "required": ["n"]}),
            )
        }
        for i in range(extra_tools):
            self.tools[f"filler_{i:03d}"] = _tool(f"filler_{i:03d}", f"Filler tool number {i}.")
        self.cancelled = 0
        self.storm = storm  # change and announce with every listing, as a hostile or buggy server may
        self.listings = 0


def build_server(state: State | None = None) -> Server:
    state = state or State()
    bus = InMemorySubscriptionBus()

    async def announce(ctx: Any) -> None:
        await bus.publish(ToolsListChanged())
        await ctx.session.send_tool_list_changed()

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        start = int(params.cursor) if params and params.cursor else 0
        names = sorted(state.tools)
        end = start + PAGE_SIZE
        if state.storm and end >= len(names):  # and a tool changes, so each listing is a real change
            state.listings += 1
            state.tools["echo"] = state.tools["echo"].model_copy(update={"description": f"Echo ({state.listings})."})
            await announce(ctx)
        return types.ListToolsResult(tools=[state.tools[n] for n in names[start:end]],
                                     next_cursor=str(end) if end < len(names) else None)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        name = params.name
        if name == "echo":
            return _text(str(args.get("text", "")))
        if name == "add_tool":
            state.tools[args["name"]] = _tool(args["name"], "Added at run time.")
        elif name == "remove_tool":
            state.tools.pop(args["name"], None)
        elif name == "change_tool":
            old = state.tools[args["name"]]
            state.tools[args["name"]] = old.model_copy(update={"description": args["description"]})
        elif name == "burst":
            for i in range(int(args["count"])):
                state.tools[f"burst_{i}"] = _tool(f"burst_{i}", "Burst tool.")
                await announce(ctx)
            return _text("ok")
        elif name == "sleep":
            return await _sleep(ctx, state, float(args.get("seconds", 1)), int(args.get("steps", 1)), args.get("until"))
        elif name == "big":
            return _text("x" * int(args["size"]))
        elif name == "block":
            time.sleep(float(args.get("seconds", 1)))
            return _text("blocked")
        elif name == "cancelled_count":
            return _text(str(state.cancelled))
        elif name == "pid":
            return _text(str(os.getpid()))
        elif name == "environment":
            return _text(json.dumps({"cwd": os.getcwd(), "env": dict(os.environ)}))
        elif name == "bad_structured":
            return types.CallToolResult(content=[], structured_content={"n": "not a number"})
        else:
            return types.CallToolResult(content=[types.TextContent(type="text", text="unknown")], is_error=True)
        await announce(ctx)
        return _text("ok")

    return _Notifying("controllable", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool,
                      on_subscriptions_listen=ListenHandler(bus))


async def _sleep(ctx: Any, state: State, seconds: float, steps: int, until: str | None = None) -> types.CallToolResult:
    """A test that must act while the call runs passes `until`, a file it creates when done, instead of
    guessing how long it will take."""
    try:
        for step in range(steps):
            await anyio.sleep(seconds / steps)
            await ctx.session.report_progress(step + 1, steps, f"step {step + 1}")
            if until is not None and os.path.exists(until):
                break
    except anyio.get_cancelled_exc_class():
        state.cancelled += 1
        raise
    return _text("slept")


def http_app(state: State | None = None) -> Any:
    return build_server(state).streamable_http_app()


def sse_app(state: State | None = None) -> Any:
    """The server behind the legacy SSE transport: GET /sse, POST /messages/."""
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    server = build_server(state)
    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Any) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    return Starlette(routes=[Route("/sse", handle_sse, methods=["GET"]),
                             Mount("/messages/", app=sse.handle_post_message)])


async def _serve_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slow-start", type=float, default=0.0, help="seconds to wait before serving")
    parser.add_argument("--hang", action="store_true", help="never answer anything")
    parser.add_argument("--extra-tools", type=int, default=0)
    parser.add_argument("--storm", action="store_true", help="change a tool and announce it with every listing")
    parser.add_argument("--spawn-grandchild", action="store_true", help="start a long sleep in our group")
    parser.add_argument("--fail-while", metavar="PATH", help="exit at once while PATH exists")
    parser.add_argument("--echo-schema", metavar="JSON", help="list `echo` with this input schema instead")
    options = parser.parse_args()
    if options.fail_while and os.path.exists(options.fail_while):
        sys.exit(3)
    if options.spawn_grandchild:
        import subprocess

        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"controllable {os.getpid()} starting", file=sys.stderr, flush=True)
    if options.hang:
        time.sleep(3600)
        return
    if options.slow_start:
        time.sleep(options.slow_start)
    state = State(options.extra_tools, storm=options.storm)
    if options.echo_schema:
        state.tools["echo"] = state.tools["echo"].model_copy(update={"input_schema": json.loads(options.echo_schema)})
    anyio.run(_serve_stdio, build_server(state))


if __name__ == "__main__":
    main()
