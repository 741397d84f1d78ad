"""The era toolbridge speaks to a `protocol: auto` server that speaks both: each caller's own.

The `MCPServer` fixture's tools ask their client over a back channel (handshake-era style), which a
2026-07-28 connection lacks. A handshake-era caller has one, so its calls must reach the server in the
handshake era, also when the tool reports the failed request in its result (`--in-band`) instead of letting
the error escape. Callers of both eras at once must never catch each other's connection mid-switch
(docs/protocol-2026-07-28.md, "Conformance").
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import free_port
from fleetdir import MCPSERVER_FIXTURE, mcpserver_over_http, serve_http, write_config
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

CALLS = 4


async def _sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="hi"), model="m")


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def _direct_2026_answer(flags: tuple[str, ...]) -> str:
    """What a 2026-era client gets from the fixture's sampling tool with no toolbridge between."""
    params = StdioServerParameters(command=sys.executable, args=[str(MCPSERVER_FIXTURE), *flags])
    async with Client(stdio_client(params), mode="auto", sampling_callback=_sample) as client:
        return _text(await client.call_tool("test_sampling", {"prompt": "p"}))


@asynccontextmanager
async def _upstream(transport: str, flags: tuple[str, ...]) -> AsyncIterator[dict[str, Any]]:
    if transport == "stdio":
        yield {"command": sys.executable, "args": [str(MCPSERVER_FIXTURE), *flags]}
        return
    async with mcpserver_over_http(*flags) as url:
        yield {"url": url}


SIMPLE = "This is a simple text response for testing."


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
@pytest.mark.parametrize("flags", [("--in-band",), ()], ids=["in-band", "errors-escape"])
async def test_callers_of_both_eras_at_once_each_get_a_back_channel_where_they_have_one(
    flags: tuple[str, ...], transport: str, tmp_path: Path
) -> None:
    """Over HTTP a handshake-era caller's calls go to a second session, and a 2026-era caller's stay in the 2026
    era, as they would reach the server directly (with the errors escaping, its sampling is retried in the
    handshake era: better than directly). A stdio server, a process per connection, is reconnected in the
    handshake era once the calls in flight are answered: no call of either era is cut off, and from then on a
    2026-era caller's sampling works too. Over one handshake-era stdio connection, a request asking back while
    other calls are in flight cannot be told apart (`connection/_relay`): there the legacy caller samples alone."""
    legacy_tool = "test_sampling" if transport != "stdio" else "test_simple_text"
    answers: dict[str, list[str]] = {"legacy": [], "auto": []}
    with anyio.fail_after(120):
        direct = await _direct_2026_answer(flags) if flags else ""
        async with _upstream(transport, flags) as spec:
            config = write_config(tmp_path, {"fixture": {**spec, "prefix": False}}, {"core": ["*"]})
            async with serve_http(config, free_port()) as base:

                async def caller(mode: str, tool: str, calls: int) -> None:
                    async with Client(
                        streamable_http_client(f"{base}/mcp"), mode=mode, sampling_callback=_sample
                    ) as client:
                        while tool not in {tool.name for tool in (await client.list_tools()).tools}:
                            await anyio.sleep(0.1)
                        for _ in range(calls):
                            arguments = {"prompt": "p"} if "sampl" in tool else {}
                            answers[mode].append(_text(await client.call_tool(tool, arguments)))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(caller, "legacy", legacy_tool, CALLS)
                    tg.start_soon(caller, "auto", "test_simple_text", CALLS * 4)
                await caller("legacy", "test_sampling", 1)
                await caller("auto", "test_sampling", 1)
    sampled = "LLM response: hi"
    assert answers["legacy"] == [sampled if legacy_tool == "test_sampling" else SIMPLE] * CALLS + [sampled]
    sampled_2026 = direct if flags and transport != "stdio" else sampled
    assert answers["auto"] == [SIMPLE] * CALLS * 4 + [sampled_2026]
