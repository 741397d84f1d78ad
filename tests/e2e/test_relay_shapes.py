"""Sampling, elicitation (form and URL) and roots through `toolbridge serve`, from every upstream shape.

The upstreams ask their client mid-call in the ways servers do: the lowlevel `Server` fixture
(input-required rounds on 2026-07-28, over HTTP here), the `MCPServer` fixture's session helpers
(over stdio and over HTTP; requests on the call's stream or related to no request at all, which
the 2026-07-28 era has no channel for), and a TypeScript SDK server over stdio (handshake era only).
Downstream clients of both eras must get each request and the upstream their answers.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import serve_app
from fleetdir import REPO, mcpserver_over_http, serve_stdio, write_config
from mcp import Client, types
from servers.conformance_fixture import http_app

pytestmark = pytest.mark.anyio

SERVERS = REPO / "tests" / "servers"
NODE = shutil.which("node")


async def _sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    prompt = params.messages[0].content
    text = prompt.text if isinstance(prompt, types.TextContent) else "?"
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=f"hi:{text}"),
                                     model="m")


async def _elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept" if params.url == "https://example.com/login" else "decline")
    return types.ElicitResult(action="accept", content={"name": "Ada", "username": "u", "email": "e@example.com"})


async def _roots(ctx: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def _until_listed(client: Client, names: set[str]) -> None:
    """Wait until every upstream's tools are registered: an upstream whose first connection failed on a loaded
    machine settles the startup window early and comes back later; relaying, not start-up, is tested here."""
    while not names <= {tool.name for tool in (await client.list_tools()).tools}:
        await anyio.sleep(0.1)


# (tool, arguments, the answer the upstream reports back)
EXPECTED = [
    ("lowlevel__test_sampling", {"prompt": "p1"}, "LLM response: hi:p1"),
    ("lowlevel__test_elicitation", {"message": "Who?"},
     'User response: action=accept, content={"name": "Ada", "username": "u", "email": "e@example.com"}'),
    ("pyhttp__test_sampling", {"prompt": "p2"}, "LLM response: hi:p2"),
    ("pyhttp__ask_url", {}, "accept"),
    ("pystdio__whoami_sampling", {"tag": "p3"}, "hi:p3"),
    ("pystdio__test_elicitation", {"message": "Who?"},
     'User response: action=accept, content={"name": "Ada", "username": "u", "email": "e@example.com"}'),
    ("pystdio__ask_url", {}, "accept"),
    ("pystdio__list_roots", {}, "file:///work/project"),
    ("ts__whoami_sampling", {"tag": "p4"}, "hi:p4"),
    ("ts__ask_name", {}, 'accept:{"name":"Ada","username":"u","email":"e@example.com"}'),
    ("ts__ask_url", {}, "accept"),
    ("ts__list_roots", {}, "file:///work/project"),
]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_upstream_shape_reaches_a_client_of_either_era(mode: str, tmp_path: Path) -> None:
    async with serve_app(http_app()) as lowlevel, mcpserver_over_http() as pyhttp:
        config = write_config(tmp_path, {
            "lowlevel": {"url": f"{lowlevel}/mcp"},
            "pyhttp": {"url": pyhttp},
            "pystdio": {"command": sys.executable, "args": [str(SERVERS / "mcpserver_fixture.py")]},
            "ts": {"command": NODE, "args": [str(SERVERS / "ts_asker.mjs")]},
        }, {"core": ["*"], "startup_wait": 30})
        with anyio.fail_after(120):
            async with Client(serve_stdio(config), mode=mode, sampling_callback=_sample, elicitation_callback=_elicit,
                              list_roots_callback=_roots) as client:
                await _until_listed(client, {name for name, _, _ in EXPECTED})
                got = [(name, _text(await client.call_tool(name, arguments))) for name, arguments, _ in EXPECTED]
    assert got == [(name, answer) for name, _, answer in EXPECTED]
