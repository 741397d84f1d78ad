"""toolbridge as the client under test of the conformance suite's client scenarios.

    MCP_CONFORMANCE_SCENARIO=<scenario> python tests/servers/conformance_client.py <server-url>

The suite's server is toolbridge's only upstream (`url:`, raw names, every tool core); a downstream SDK
client then does over stdio what the reference client does in the scenario, so every request the suite sees
is one toolbridge made as the client of an upstream.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import anyio
import yaml
from mcp import Client, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
LIST_ONLY = {"json-schema-ref-no-deref", "json-schema-2020-12-preservation"}


async def main(url: str, scenario: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory)
        (config / "upstreams").mkdir()
        (config / "upstreams" / "suite.yaml").write_text(yaml.safe_dump({"url": url, "prefix": False}))
        (config / "toolsets.yaml").write_text(yaml.safe_dump({"core": ["*"], "startup_wait": 20}))
        serve = ["-m", "proxy", "serve", "--config-dir", str(config)]
        server = StdioServerParameters(command=sys.executable, args=serve, cwd=str(REPO),
                                       env={**os.environ, "TOOLBRIDGE_LOG_LEVEL": "warning"})
        async with Client(stdio_client(server), mode="legacy") as client:
            tools = [tool for tool in (await client.list_tools()).tools
                     if tool.name not in ("tool_search", "tool_describe", "tool_call")]
            if tools and scenario not in LIST_ONLY:
                await client.call_tool(tools[0].name, {"a": 2, "b": 3})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""))
