"""An upstream's list change reaches downstream sessions through `toolbridge serve --transport http`, in both
eras, in time for the conformance suite: `server-stateless` opens a listen stream, calls a list trigger and
waits 1.5 s for the list_changed. The upstream is the conformance fixture over stdio, whose triggers toggle
a real tool and prompt (`servers/list_triggers.py`), so toolbridge re-lists it and carries a real change.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port
from fleetdir import REPO, serve_http, write_config
from mcp import Client, types

pytestmark = pytest.mark.anyio

FIXTURE = REPO / "tests" / "servers" / "conformance_fixture.py"
SUITE_WINDOW = 1.5  # seconds the suite's listen stream waits for the change, from opening it
# The suite's order: a prompt change, then at once a tool change on a fresh stream (twice, to toggle back).
CHANGES = [("test_trigger_prompt_change", "prompts_list_changed", "test_prompt_added_by_trigger"),
           ("test_trigger_tool_change", "tools_list_changed", "test_tool_added_by_trigger")] * 2


@pytest.fixture
async def toolbridge(tmp_path: Path) -> AsyncIterator[str]:
    """The MCP endpoint of a toolbridge whose only upstream is the fixture (raw names, all tools core)."""
    config = write_config(tmp_path, {"fixture": {"command": sys.executable, "args": [str(FIXTURE)],
                                                 "prefix": False}}, {"core": ["*"]})
    async with serve_http(config, free_port()) as base, httpx2.AsyncClient() as http:
        with anyio.fail_after(30):
            while (await http.get(f"{base}/healthz")).json()["servers"].get("fixture") != "ready":
                await anyio.sleep(0.05)
        yield f"{base}/mcp"


async def _listed(client: Client) -> set[str]:
    return ({tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
            | {prompt.name for prompt in (await client.list_prompts(cache_mode="refresh")).prompts})


async def test_a_change_right_after_another_reaches_a_2026_listen_stream_within_the_suites_window(
        toolbridge: str) -> None:
    waits: list[float] = []
    async with Client(toolbridge) as client:
        assert client.protocol_version == "2026-07-28"
        for trigger, kind, added in CHANGES:
            opened = anyio.current_time()
            async with client.listen(**{kind: True}) as stream:
                present = added not in await _listed(client)
                await client.call_tool(trigger, {})
                with anyio.fail_after(5):
                    await anext(aiter(stream))
                waits.append(anyio.current_time() - opened)
            assert (added in await _listed(client)) is present, (trigger, present)
    assert max(waits) < SUITE_WINDOW, waits


async def test_a_change_reaches_a_handshake_era_session_on_its_connection(toolbridge: str) -> None:
    heard: dict[type, anyio.Event] = {types.ToolListChangedNotification: anyio.Event(),
                                      types.PromptListChangedNotification: anyio.Event()}

    async def on_message(message: Any) -> None:
        if type(message) in heard:
            heard[type(message)].set()

    async with Client(toolbridge, mode="legacy", message_handler=on_message) as client:
        before = await _listed(client)
        for trigger, notification in (("test_trigger_tool_change", types.ToolListChangedNotification),
                                      ("test_trigger_prompt_change", types.PromptListChangedNotification)):
            await client.call_tool(trigger, {})
            with anyio.fail_after(SUITE_WINDOW):
                await heard[notification].wait()
        after = await _listed(client)
    assert after - before == {"test_tool_added_by_trigger", "test_prompt_added_by_trigger"}
