"""Everything but tools through `toolbridge serve` (stdio), from SDK clients of both protocol eras.

The upstreams are real: the conformance fixture (an SDK server; toolbridge reaches it in the
2026-07-28 era) and `@modelcontextprotocol/server-everything` (TypeScript, handshake era). The
downstream clients are SDK clients in `legacy` (2025-11-25) and `auto` (2026-07-28) mode: sampling
and elicitation reach them as requests on the call's stream or as input-required rounds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fleetdir import REPO, serve_stdio, write_config
from mcp import Client, types

pytestmark = pytest.mark.anyio

SETTLED = {"startup_wait": 30}  # toolsets.yaml: a session waits for the upstream to register

FIXTURE = REPO / "tests" / "servers" / "conformance_fixture.py"
EVERYTHING = REPO / ".venv" / "bin" / "mcp-server-everything"
MODES = ["legacy", "auto"]


async def _sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    prompt = params.messages[0].content
    text = prompt.text if isinstance(prompt, types.TextContent) else "?"
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=f"hi to {text}"),
                                     model="test-model")


async def _elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert isinstance(params, types.ElicitRequestFormParams)
    return types.ElicitResult(action="accept", content={"username": "u", "email": "e@example.com", "name": "Ada"})


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize("mode", MODES)
async def test_bridge_tool_call_relays_sampling_and_elicitation_to_the_caller(mode: str, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"fixture": {"command": sys.executable, "args": [str(FIXTURE)]}}, SETTLED)
    with anyio.fail_after(60):
        async with Client(serve_stdio(config), mode=mode, sampling_callback=_sample,
                          elicitation_callback=_elicit) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {"tool_search", "tool_describe",
                                                                          "tool_call"}
            sampled = await client.call_tool("tool_call", {"name": "fixture__test_sampling",
                                                           "arguments": {"prompt": "Say hi"}})
            elicited = await client.call_tool("tool_call", {"name": "fixture__test_elicitation",
                                                            "arguments": {"message": "Who?"}})
    assert not sampled.is_error and _text(sampled) == "LLM response: hi to Say hi"
    assert not elicited.is_error
    assert _text(elicited) == ('User response: action=accept, content={"username": "u", '
                               '"email": "e@example.com", "name": "Ada"}')


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_sampling_is_told_so_as_the_upstream_tells_it_directly(mode: str,
                                                                                      tmp_path: Path) -> None:
    """The upstream sees the caller's own capabilities (not toolbridge's, which take sampling), so it answers
    as it would directly; an upstream that asks anyway gets toolbridge's refusal (`rounds.refusal`)."""
    config = write_config(tmp_path, {"fixture": {"command": sys.executable, "args": [str(FIXTURE)]}}, SETTLED)
    with anyio.fail_after(60):
        async with Client(serve_stdio(config), mode=mode) as client:
            result = await client.call_tool("tool_call", {"name": "fixture__test_sampling",
                                                          "arguments": {"prompt": "Say hi"}})
    assert result.is_error
    assert _text(result) == "The client does not support sampling."


@pytest.mark.skipif(not EVERYTHING.exists(), reason="server-everything not installed: run scripts/setup.sh")
@pytest.mark.parametrize("mode", MODES)
async def test_server_everything_resources_prompts_completion_sampling_and_elicitation(
    mode: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, {"everything": {"command": str(EVERYTHING), "args": ["stdio"]}}, SETTLED)
    with anyio.fail_after(90):
        async with Client(serve_stdio(config), mode=mode, sampling_callback=_sample,
                          elicitation_callback=_elicit) as client:
            capabilities = client.server_capabilities
            resources = (await client.list_resources()).resources
            templates = (await client.list_resource_templates()).resource_templates
            read = await client.read_resource("demo://resource/dynamic/text/7")
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            prompt = await client.get_prompt("everything__args-prompt", {"city": "Paris", "state": "IDF"})
            completion = await client.complete(
                types.PromptReference(type="ref/prompt", name="everything__completable-prompt"),
                {"name": "department", "value": "E"})
            sampled = await client.call_tool("tool_call", {"name": "everything__trigger-sampling-request",
                                                           "arguments": {"prompt": "Say hi"}})
            elicited = await client.call_tool("tool_call", {"name": "everything__trigger-elicitation-request",
                                                            "arguments": {}})
    assert capabilities.resources is not None and capabilities.prompts is not None
    assert capabilities.completions is not None
    assert "demo://resource/static/document/architecture.md" in {r.uri for r in resources}
    assert "demo://resource/dynamic/text/{resourceId}" in {t.uri_template for t in templates}
    assert read.contents[0].uri == "demo://resource/dynamic/text/7"
    assert {"everything__simple-prompt", "everything__args-prompt", "everything__completable-prompt"} <= prompts
    assert "Paris" in str(prompt.messages[0].content)
    assert completion.completion.values == ["Engineering"]
    assert not sampled.is_error and "hi to Resource trigger-sampling-request context: Say hi" in _text(sampled)
    assert not elicited.is_error and "Name: Ada" in _text(elicited)


@pytest.mark.skipif(not EVERYTHING.exists(), reason="server-everything not installed: run scripts/setup.sh")
async def test_server_everything_logs_reach_a_session_that_set_a_level(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"everything": {"command": str(EVERYTHING), "args": ["stdio"]}}, SETTLED)
    received: list[types.LoggingMessageNotificationParams] = []
    arrived = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)
        arrived.set()

    with anyio.fail_after(60):
        async with Client(serve_stdio(config), mode="legacy", logging_callback=on_log) as client:
            await client.set_logging_level("debug")
            await client.call_tool("tool_call", {"name": "everything__toggle-simulated-logging", "arguments": {}})
            await arrived.wait()
    assert received[0].logger is not None and received[0].logger.startswith("everything")
