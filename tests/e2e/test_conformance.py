"""The official MCP conformance suite (server scenarios): against two fixtures, and through toolbridge.

The suite runs need `scripts/conformance-setup.sh` (Node >= 22 and the pinned suite in `.tools/`)
and are skipped without it. A direct run pins what each fixture passes; `toolbridge serve --transport
http` in front of it (a stdio upstream, or a Streamable HTTP one) with `prefix: false` and
`core: ["*"]` must pass every scenario the fixture passes directly, judged on each check's details.
The fixtures are two shapes of server: the lowlevel `Server` (`conformance_fixture.py`, both eras,
input-required rounds on 2026-07-28) and `MCPServer` with its session helpers
(`mcpserver_fixture.py`, whose tools ask the client over a back channel, as handshake-era servers do).
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port, serve_app
from fleetdir import MCPSERVER_FIXTURE, mcpserver_over_http, serve_http
from mcp import Client, StdioServerParameters, stdio_client, types
from servers.conformance_fixture import http_app

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURE = REPO / "tests" / "servers" / "conformance_fixture.py"
SCRIPT = REPO / "scripts" / "conformance.py"
SUITE = REPO / ".tools" / "conformance" / "node_modules" / "@modelcontextprotocol" / "conformance"

pytestmark = pytest.mark.anyio

# Every server scenario of @modelcontextprotocol/conformance 0.1.16 (`--suite all`: the 30 active
# ones plus the pending json-schema-2020-12 and server-sse-polling).
SCENARIOS = sorted([
    "server-initialize", "logging-set-level", "ping", "completion-complete", "tools-list",
    "tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
    "tools-call-mixed-content", "tools-call-with-logging", "tools-call-error", "tools-call-with-progress",
    "tools-call-sampling", "tools-call-elicitation", "json-schema-2020-12", "elicitation-sep1034-defaults",
    "server-sse-polling", "server-sse-multiple-streams", "elicitation-sep1330-enums", "resources-list",
    "resources-read-text", "resources-read-binary", "resources-templates-read", "resources-subscribe",
    "resources-unsubscribe", "prompts-list", "prompts-get-simple", "prompts-get-with-args",
    "prompts-get-embedded-resource", "prompts-get-with-image", "dns-rebinding-protection",
])
# What `MCPServer` alone does not serve: `logging/setLevel` and `resources/(un)subscribe` (no API for
# them), and a hand-written 2020-12 schema (it derives the schema from the function).
MCPSERVER_MISSES = {"logging-set-level", "tools-call-with-logging", "json-schema-2020-12", "resources-subscribe",
                    "resources-unsubscribe"}
# The suite's resumability probe sends `mcp-protocol-version: 2025-03-26`, too old for the SDK to
# prime the stream or let a tool close it, so the two SEP-1699 recommendations stay warnings.
WARNINGS = {"server-sse-polling": ["server-sse-priming-event", "server-sse-retry-field"]}


async def _sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="hi"), model="m")


async def _elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"username": "u", "email": "e@example.com"})


def _text(result: types.CallToolResult) -> str:
    assert not result.is_error and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_fixture_serves_the_scenarios_over_stdio_in_both_eras(mode: str) -> None:
    """Sampling and elicitation go over the back-channel (legacy) or as input required (2026-07-28)."""
    params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE)])
    with anyio.fail_after(20):
        async with Client(stdio_client(params, errlog=sys.stderr), mode=mode, sampling_callback=_sample,
                          elicitation_callback=_elicit) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
            templates = (await client.list_resource_templates()).resource_templates
            read = await client.read_resource("test://template/123/data")
            sampled = await client.call_tool("test_sampling", {"prompt": "Say hi"})
            elicited = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert {"test_simple_text", "test_sampling", "test_elicitation_sep1330_enums", "json_schema_2020_12_tool",
            "test_reconnection"} <= tools and len(tools) == 14
    assert prompts == {"test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource",
                       "test_prompt_with_image"}
    assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
    assert '"id": "123"' in read.contents[0].text
    assert _text(sampled) == "LLM response: hi"
    assert _text(elicited) == 'User response: action=accept, content={"username": "u", "email": "e@example.com"}'


needs_suite = pytest.mark.skipif(not (SUITE / "package.json").exists(),
                                 reason="conformance suite not installed in .tools/: run scripts/conformance-setup.sh")


async def _run_suite(url: str, outcome: Path) -> tuple[dict[str, Any], str]:
    with anyio.fail_after(150):
        done = await anyio.run_process(
            [sys.executable, str(SCRIPT), url, "--json", str(outcome), "--timeout", "120"], check=False)
    return json.loads(outcome.read_text()), done.stdout.decode()


@needs_suite
async def test_suite_passes_every_server_scenario_against_the_fixture(tmp_path: Path) -> None:
    async with serve_app(http_app()) as base:
        result, output = await _run_suite(f"{base}/mcp", tmp_path / "direct.json")
    assert result["failed"] == {}, output
    assert result["passed"] == SCENARIOS
    assert result["warnings"] == WARNINGS


def _fixture_upstream(config_dir: Path, target: dict[str, Any]) -> Path:
    """A config dir with the fixture as its only upstream, raw names, every tool core (pass-through)."""
    (config_dir / "upstreams").mkdir(parents=True)
    spec = {**target, "prefix": False, "connect_timeout": 20}
    (config_dir / "upstreams" / "fixture.yaml").write_text(yaml.safe_dump(spec))
    (config_dir / "toolsets.yaml").write_text(yaml.safe_dump({"core": ["*"]}))
    return config_dir


async def _wait_ready(base: str) -> None:
    async with httpx2.AsyncClient() as http:
        with anyio.fail_after(30):
            while (await http.get(f"{base}/healthz")).json()["servers"].get("fixture") != "ready":
                await anyio.sleep(0.05)


@needs_suite
@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
async def test_suite_passes_the_same_scenarios_through_toolbridge(transport: str, tmp_path: Path) -> None:
    async with serve_app(http_app()) as fixture_base:
        target = {"command": sys.executable, "args": [str(FIXTURE)]} if transport == "stdio" \
            else {"url": f"{fixture_base}/mcp"}
        config_dir = _fixture_upstream(tmp_path / "config", target)
        async with serve_http(config_dir, free_port()) as base:
            await _wait_ready(base)
            result, output = await _run_suite(f"{base}/mcp", tmp_path / "proxied.json")
    assert result["failed"] == {}, output
    assert result["passed"] == SCENARIOS
    assert result["warnings"] == WARNINGS


@needs_suite
async def test_an_mcpserver_fixture_passes_through_toolbridge_what_it_passes_directly(tmp_path: Path) -> None:
    """Its tools sample and elicit over a back channel, which a 2026-07-28 connection lacks: toolbridge
    (which reaches it in that era first) must notice and speak the handshake era to it. The direct run and
    the two proxied ones run at once, each against a fixture process of its own."""
    runs: dict[str, tuple[dict[str, Any], str]] = {}

    async def direct() -> None:
        async with mcpserver_over_http() as url:
            runs["direct"] = await _run_suite(url, tmp_path / "direct.json")

    async def proxied(transport: str) -> None:
        async with AsyncExitStack() as stack:
            target = {"command": sys.executable, "args": [str(MCPSERVER_FIXTURE)]} if transport == "stdio" \
                else {"url": await stack.enter_async_context(mcpserver_over_http())}
            config_dir = _fixture_upstream(tmp_path / transport, target)
            base = await stack.enter_async_context(serve_http(config_dir, free_port()))
            await _wait_ready(base)
            runs[transport] = await _run_suite(f"{base}/mcp", tmp_path / f"{transport}.json")

    async with anyio.create_task_group() as tg:
        tg.start_soon(direct)
        for transport in ("stdio", "streamable-http"):
            tg.start_soon(proxied, transport)
    direct_run, output = runs["direct"]
    assert set(direct_run["passed"]) == set(SCENARIOS) - MCPSERVER_MISSES, output
    for transport in ("stdio", "streamable-http"):
        proxied_run, output = runs[transport]
        assert set(direct_run["passed"]) <= set(proxied_run["passed"]), (transport, output)
