"""A deferred tool called by its own name: the answer says to go through `tool_call`, not "unknown"."""

from __future__ import annotations

import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client, types

from proxy.config import ProfileConfig, ToolsetsConfig

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
CONFIG = ToolsetsConfig(core=("time__get_current_time",),
                        profiles={"default": ProfileConfig(), "nogit": ProfileConfig(disabled=("git",))})


def fleet() -> list[Upstream]:
    return [Upstream("time", [tool("get_current_time", "Get the current time.")]),
            Upstream("git", [tool("git_status", "Show the working tree status.", {"repo_path": {"type": "string"}})])]


def text_of(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_a_direct_call_to_a_deferred_tool_points_at_tool_call(mode: str) -> None:
    async with gateway(fleet(), CONFIG) as harness, Client(harness.server, mode=mode) as client:
        result = await client.call_tool("git__git_status", {"repo_path": "."})
        assert result.is_error
        assert "deferred" in text_of(result) and "tool_call" in text_of(result)
        assert "Unknown tool" not in text_of(result)
        assert harness.upstreams["git"].calls == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_outside_the_session_stays_unknown_when_called_directly(mode: str) -> None:
    async with gateway(fleet(), CONFIG, profile="nogit") as harness, Client(harness.server, mode=mode) as client:
        result = await client.call_tool("git__git_status", {"repo_path": "."})
        assert result.is_error and "Unknown tool" in text_of(result) and "deferred" not in text_of(result)
