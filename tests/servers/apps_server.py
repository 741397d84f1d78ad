"""An MCP App written with the SDK's `Apps` extension: a tool with a UI, an app-only tool, a tool the
model may call but apps may not, and a tool whose result links its UI. Run as a stdio server
(`python -m tests.servers.apps_server [--log FILE] [--delay S]`) or built in-process with `build()`.

Every call is recorded in `calls`, and with `--log FILE` also appended to FILE, one JSON line each,
so a test sees which callbacks reached the server.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from mcp import types
from mcp.server import MCPServer
from mcp.server.apps import Apps, ResourceCsp, client_supports_apps
from mcp.server.mcpserver.context import Context

HTML = "<!doctype html><html><body><p id=\"t\">clock</p>\n<script>/* é ✓ */</script></body></html>\n"
UI_URI = "ui://clock/app.html"
CSP = ResourceCsp(connect_domains=["https://api.example.com"], resource_domains=["https://cdn.example.com"])


def build(calls: list[tuple[str, dict[str, Any]]] | None = None, log: Path | None = None) -> MCPServer:
    """The app server; `calls` (and `log`) record each call as (tool, arguments)."""
    record = calls if calls is not None else []

    def called(name: str, arguments: dict[str, Any]) -> None:
        record.append((name, arguments))
        if log is not None:
            with log.open("a", encoding="utf-8") as out:
                out.write(json.dumps([name, arguments]) + "\n")

    apps = Apps()
    apps.add_html_resource(UI_URI, HTML, name="clock-ui", csp=CSP, prefers_border=True)

    @apps.tool(resource_uri=UI_URI, name="show_clock", description="Show a clock in an interactive UI.")
    def show_clock(zone: str = "UTC") -> str:
        called("show_clock", {"zone": zone})
        return f"12:00 {zone}"

    @apps.tool(resource_uri=UI_URI, visibility=["app"], name="tick", description="Advance the clock (app only).")
    def tick(seconds: int = 1) -> str:
        called("tick", {"seconds": seconds})
        return f"ticked {seconds}"

    server = MCPServer("clock", extensions=[apps])

    @server.tool(name="set_alarm", description="Set an alarm.", meta={"ui": {"visibility": ["model"]}})
    def set_alarm(at: str) -> str:
        called("set_alarm", {"at": at})
        return f"alarm at {at}"

    @server.tool(name="host_renders_apps", description="Whether the client declared MCP Apps support.")
    def host_renders_apps(ctx: Context) -> str:
        return "yes" if client_supports_apps(ctx) else "no"

    @server.tool(name="open_clock", description="Link to the clock UI.")
    def open_clock() -> types.CallToolResult:
        called("open_clock", {})
        link = types.ResourceLink(name="clock-ui", uri=UI_URI, mime_type="text/html;profile=mcp-app")
        return types.CallToolResult(content=[link], _meta={"ui": {"resourceUri": UI_URI}})

    return server


if __name__ == "__main__":
    log_path = Path(sys.argv[sys.argv.index("--log") + 1]) if "--log" in sys.argv else None
    if "--delay" in sys.argv:  # seconds before serving: a server still starting while it is listed from the cache
        time.sleep(float(sys.argv[sys.argv.index("--delay") + 1]))
    build(log=log_path).run("stdio")
