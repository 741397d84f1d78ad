"""An upstream's error results and log messages reach a client redacted and escaped, in both eras.

A real SDK upstream, in memory, answers with forged text: terminal escapes, a carriage return, and
a line break followed by what looks like a toolbridge log record, plus a credential it echoes.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from inprocess import gateway, tool
from mcp import Client, types
from mcp.server.lowlevel import Server

from proxy import errors

pytestmark = pytest.mark.anyio

KEY = "hdr-literal-0b8f3e91c4"
FORGED = f"boom \x1b[2J\x1b]0;PWNED\x07 over\rwritten\n1999-01-01 00:00:00,000 ERROR proxy: FORGED {KEY}"
SPELLED = ("boom \\x1b[2J\\x1b]0;PWNED\\x07 over\\rwritten\\n1999-01-01 00:00:00,000 ERROR proxy: FORGED "
           "[REDACTED]")


def forger() -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool("fail"), tool("log")])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "log":
            await ctx.session.send_log_message("error", {"message\r": FORGED, "lines": [FORGED]},
                                               logger="up\x1b[2J\nstream", related_request_id=ctx.request_id)
            return types.CallToolResult(content=[types.TextContent(type="text", text="logged")])
        return types.CallToolResult(content=[types.TextContent(type="text", text=FORGED)], is_error=True)

    return Server("forger", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.fixture(autouse=True)
def configured_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "_known_secrets", set())
    errors.remember_secrets({KEY})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_error_result_reaches_the_client_redacted_and_escaped(mode: str) -> None:
    async with gateway([], servers={"forger": forger()}, mode=mode) as harness, \
            Client(harness.server, mode=mode) as client:
        result = await client.call_tool("tool_call", {"name": "forger__fail", "arguments": {}})
        assert result.is_error and [block.text for block in result.content] == [SPELLED]  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_relayed_log_message_is_redacted_and_escaped(mode: str) -> None:
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with gateway([], servers={"forger": forger()}, mode=mode) as harness, \
            Client(harness.server, mode=mode, log_level="debug", logging_callback=on_log) as client:
        if mode == "legacy":
            await client.set_logging_level("debug")
        result = await client.call_tool("tool_call", {"name": "forger__log", "arguments": {}})
        assert not result.is_error
        with anyio.fail_after(5):
            while not logged:
                await anyio.sleep(0.01)
    (params,) = logged
    assert params.logger == "forger/up\\x1b[2J\\nstream"
    assert params.data == {"message\\r": SPELLED, "lines": [SPELLED]}
