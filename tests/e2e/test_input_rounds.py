"""Input-required rounds (SEP-2322) and the caller's own capabilities (SEP-2575) through toolbridge.

`toolbridge serve --transport http` with the conformance fixture (`servers/conformance_fixture.py`, the
lowlevel `Server`) as its only upstream, over stdio, which toolbridge reaches in the 2026-07-28 era. The
real SDK `Client` is the caller: a 2026-era one drives its rounds by hand (`allow_input_required`), so
what toolbridge hands it is seen as sent.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port
from fleetdir import serve_http
from mcp import Client, MCPError, types
from servers import mrtr_tools

FIXTURE = Path(__file__).resolve().parent.parent / "servers" / "conformance_fixture.py"

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _toolbridge(tmp_path: Path) -> AsyncIterator[str]:
    """toolbridge's MCP URL, the fixture its only upstream (raw names, every tool core), reached in the 2026 era
    whoever calls: its input rounds are 2026-only (with `protocol: auto`, a handshake-era caller that can answer
    back would reach this two-era server in the handshake era, as directly: `e2e/test_upstream_era.py`)."""
    (tmp_path / "upstreams").mkdir()
    spec = {"command": sys.executable, "args": [str(FIXTURE)], "prefix": False, "connect_timeout": 20,
            "protocol": "2026"}
    (tmp_path / "upstreams" / "fixture.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "toolsets.yaml").write_text(yaml.safe_dump({"core": ["*"]}))
    async with serve_http(tmp_path, free_port()) as base, httpx2.AsyncClient() as http:
        with anyio.fail_after(30):
            while (await http.get(f"{base}/healthz")).json()["servers"].get("fixture") != "ready":
                await anyio.sleep(0.05)
        yield f"{base}/mcp"


def _accept(**content: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


async def _unused(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("rounds are driven by hand here")  # the callback declares elicitation


def _text(result: types.CallToolResult) -> str:
    assert not result.is_error and isinstance(result.content[0], types.TextContent), result
    return result.content[0].text


async def test_input_requests_keep_the_upstreams_keys_and_each_round_has_its_own_state(tmp_path: Path) -> None:
    async with _toolbridge(tmp_path) as url, Client(url, elicitation_callback=_unused) as client:
        session = client.session
        with anyio.fail_after(30):
            asked = await session.call_tool("test_input_required_result_elicitation", {}, allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult) and set(asked.input_requests or {}) == {"user_name"}
            with pytest.raises(MCPError) as renamed:  # a state resumes only the tool it was given for
                await session.call_tool(
                    "test_input_required_result_multi_round",
                    {},
                    input_responses={"user_name": _accept(name="Mallory")},
                    request_state=asked.request_state,
                    allow_input_required=True,
                )
            assert renamed.value.code == types.INVALID_PARAMS
            done = await session.call_tool(
                "test_input_required_result_elicitation",
                {},
                input_responses={"user_name": _accept(name="Alice")},
                request_state=asked.request_state,
                allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult) and _text(done) == "Hello, Alice!"

            name = "test_input_required_result_multi_round"
            first = await session.call_tool(name, {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and set(first.input_requests or {}) == {"step1"}
            second = await session.call_tool(
                name,
                {},
                input_responses={"step1": _accept(name="Alice")},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(second, types.InputRequiredResult) and set(second.input_requests or {}) == {"step2"}
            assert second.request_state not in (None, first.request_state)
            with pytest.raises(MCPError) as stale:  # round 1 is over: its state answers nothing any more
                await session.call_tool(
                    name,
                    {},
                    input_responses={"step2": _accept(color="red")},
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            assert stale.value.code == types.INVALID_PARAMS
            third = await session.call_tool(
                name,
                {},
                input_responses={"step2": _accept(color="blue")},
                request_state=second.request_state,
                allow_input_required=True,
            )
    assert isinstance(third, types.CallToolResult) and _text(third) == "Alice likes blue"


async def test_answers_offered_before_any_round_reach_the_upstream_as_they_would_directly(tmp_path: Path) -> None:
    """A 2026-era client may send `inputResponses` with its first request (no `requestState`): the upstream
    takes the answer under the key it asks, ignores the others, and completes at once, as it does when
    called directly (conformance `input-required-result-ignore-extra-params`). An answer whose shape does
    not fit the question is not taken: the question is asked."""
    name = "test_input_required_result_elicitation"
    async with _toolbridge(tmp_path) as url, Client(url, elicitation_callback=_unused) as client:
        with anyio.fail_after(30):
            offered = await client.session.call_tool(
                name, {}, input_responses={"user_name": _accept(name="Alice"), "unknown_extra_key": _accept(foo="bar")},
                allow_input_required=True)
            misfit = await client.session.call_tool(
                name, {}, input_responses={"user_name": types.ListRootsResult(roots=[])}, allow_input_required=True)
    assert isinstance(offered, types.CallToolResult) and _text(offered) == "Hello, Alice!"
    assert isinstance(misfit, types.InputRequiredResult) and set(misfit.input_requests or {}) == {"user_name"}


async def test_a_prompt_and_a_read_ask_a_2026_era_caller_in_rounds(tmp_path: Path) -> None:
    async with _toolbridge(tmp_path) as url, Client(url, elicitation_callback=_unused) as client:
        session = client.session
        with anyio.fail_after(30):
            prompt = mrtr_tools.PROMPT.name
            asked = await session.get_prompt(prompt, allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult) and set(asked.input_requests or {}) == {"user_context"}
            with pytest.raises(MCPError) as elsewhere:  # a prompt's state resumes no read
                await session.read_resource(
                    mrtr_tools.RESOURCE.uri,
                    input_responses={"user_context": _accept()},
                    request_state=asked.request_state,
                    allow_input_required=True,
                )
            assert elsewhere.value.code == types.INVALID_PARAMS
            got = await session.get_prompt(
                prompt,
                input_responses={"user_context": _accept(context="tests")},
                request_state=asked.request_state,
                allow_input_required=True,
            )
            assert isinstance(got, types.GetPromptResult)
            assert isinstance(got.messages[0].content, types.TextContent)
            assert got.messages[0].content.text == "Context: tests"

            read = await session.read_resource(mrtr_tools.RESOURCE.uri, allow_input_required=True)
            assert isinstance(read, types.InputRequiredResult) and set(read.input_requests or {}) == {"reader_name"}
            contents = await session.read_resource(
                mrtr_tools.RESOURCE.uri,
                input_responses={"reader_name": _accept(name="Bo")},
                request_state=read.request_state,
                allow_input_required=True,
            )
    assert isinstance(contents, types.ReadResourceResult)
    assert [c.text for c in contents.contents if isinstance(c, types.TextResourceContents)] == ["Read by Bo"]


async def _sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="Paris"), model="m")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_undeclared_capability_is_refused_as_the_upstream_refuses_it_directly(
    mode: str, tmp_path: Path
) -> None:
    """The upstream judges each request by its caller's capabilities (a 2026-era caller's own `_meta`, a
    handshake-era one's `initialize`), not by toolbridge's, which take sampling for anyone; an upstream that
    asks regardless is refused for the caller."""
    async with (
        _toolbridge(tmp_path) as url,
        Client(url, mode=mode) as without,
        Client(url, mode=mode, sampling_callback=_sample) as with_sampling,
    ):
        with anyio.fail_after(30):
            with pytest.raises(MCPError) as refused:
                await without.call_tool("test_missing_capability", {})
            sampled = await with_sampling.call_tool("test_missing_capability", {})
            asked_anyway = await without.call_tool("test_input_required_result_sampling", {})
    assert refused.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.data == {"requiredCapabilities": {"sampling": {}}}
    assert _text(sampled) == "Sampled: Paris"
    assert asked_anyway.is_error  # an upstream that asks regardless is refused by toolbridge, not the caller asked
    assert "the downstream client does not support sampling" in str(asked_anyway.content[0])


async def test_a_prompt_asks_a_handshake_era_caller_on_its_own_stream(tmp_path: Path) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return _accept(context="from the stream")

    async with _toolbridge(tmp_path) as url, Client(url, mode="legacy", elicitation_callback=elicit) as client:
        with anyio.fail_after(30):
            got = await client.get_prompt(mrtr_tools.PROMPT.name)
    assert isinstance(got.messages[0].content, types.TextContent)
    assert got.messages[0].content.text == "Context: from the stream"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_read_the_upstream_refuses_names_the_uri_asked_for(mode: str, tmp_path: Path) -> None:
    """SEP-2164: a resource not found is -32602 whose `data.uri` is the URI the client asked for (here the
    qualified form, which reaches the upstream whatever it lists: it is the upstream that refuses)."""
    uri = "toolbridge://server/fixture/test://nonexistent"
    async with _toolbridge(tmp_path) as url, Client(url, mode=mode) as client:
        with anyio.fail_after(30), pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
    assert refused.value.code == types.INVALID_PARAMS
    assert refused.value.data == {"uri": uri}
