"""The era toolbridge speaks to a `protocol: auto` server that speaks both: each caller's own.

The `MCPServer` fixture's tools ask their client over a back channel (handshake-era style), which a
2026-07-28 connection lacks. A handshake-era caller has one, so its calls must reach the server in the
handshake era, also when the tool reports the failed request in its result (`--in-band`) instead of letting
the error escape; a 2026-era caller's calls go as they would go directly. Callers of both eras at once must
never catch each other's connection mid-switch (docs/protocol-2026-07-28.md, "Conformance").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import free_port
from fleetdir import MCPSERVER_FIXTURE, serve_http, write_config
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


@pytest.mark.parametrize("flags", [("--in-band",), ()], ids=["in-band", "errors-escape"])
async def test_callers_of_both_eras_at_once_each_get_what_they_would_get_directly(
    flags: tuple[str, ...], tmp_path: Path
) -> None:
    """With the errors escaping, a 2026-era caller's sampling is retried over the handshake-era connection
    (better than directly); that one runs alone: two calls asking back at once over one handshake-era
    connection cannot be told apart (`connection/_relay`)."""
    config = write_config(
        tmp_path,
        {"fixture": {"command": sys.executable, "args": [str(MCPSERVER_FIXTURE), *flags], "prefix": False}},
        {"core": ["*"]},
    )
    tool_2026 = "test_sampling" if flags else "test_simple_text"
    answers: dict[str, list[str]] = {"legacy": [], "auto": []}
    with anyio.fail_after(90):
        expected_2026 = await _direct_2026_answer(flags) if flags else "This is a simple text response for testing."
        async with serve_http(config, free_port()) as base:

            async def caller(mode: str, tool: str, calls: int) -> None:
                async with Client(
                    streamable_http_client(f"{base}/mcp"), mode=mode, sampling_callback=_sample
                ) as client:
                    while tool not in {tool.name for tool in (await client.list_tools()).tools}:
                        await anyio.sleep(0.1)
                    for _ in range(calls):
                        answers[mode].append(
                            _text(await client.call_tool(tool, {"prompt": "p"} if "sampl" in tool else {}))
                        )

            async with anyio.create_task_group() as tg:
                tg.start_soon(caller, "legacy", "test_sampling", CALLS)
                tg.start_soon(caller, "auto", tool_2026, CALLS * 4)
            if not flags:
                await caller("auto", "test_sampling", 1)
    assert answers["legacy"] == ["LLM response: hi"] * CALLS
    assert answers["auto"] == [expected_2026] * CALLS * 4 + ([] if flags else ["LLM response: hi"])
