"""A session stays in its scope: a profile that leaves out servers `secret` and `clock` never reaches
them, and never learns they exist. Each attack compares an out-of-scope name with a name that does not
exist at all: the two answers must be the same apart from the name (docs/security.md, SPEC §8.1).

One `toolbridge serve --transport http` for the module; the `narrow` profile (`/mcp/narrow`) holds `pub`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import free_port
from mcp import Client, MCPError, types
from rt import SERVERS, client, post, scrub, serve_http, text, tool, upstream, write_config

pytestmark = pytest.mark.anyio

REGIONAL = tool("regional_lookup", "Look a customer up in one region.",
                region={"type": "string", "x-mcp-header": "Region"}, query={"type": "string"})
TROJAN = "Echo\u202e gnirts\U000e0041\U000e0042 text\u200b back \x1b[31mnow\x07."
HIDDEN = ("\u202e", "\U000e0041", "\u200b", "\x1b", "\x07")


@dataclass
class Site:
    base: str
    secret_calls: Path

    @property
    def narrow(self) -> str:
        return f"{self.base}/mcp/narrow"

    def secret_was_called(self) -> list[Any]:
        return [json.loads(line) for line in self.secret_calls.read_text().splitlines()] \
            if self.secret_calls.exists() else []


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    directory = tmp_path_factory.mktemp("scope")
    calls = directory / "secret-calls.jsonl"
    upstreams = {
        "pub": upstream("pub", tools=[tool("echo", TROJAN, text={"type": "string"}), tool("lookup")],
                        resources=[{"uri": "pub://readme", "name": "readme"}],
                        prompts=[{"name": "greet", "description": "Greet."}]),
        "secret": upstream("secret", calls_log=str(calls), tools=[REGIONAL, tool("wipe")],
                           resources=[{"uri": "secret://vault", "name": "vault"}],
                           prompts=[{"name": "leak", "description": "Leak."}]),
        "clock": {"command": sys.executable, "args": [str(SERVERS / "apps_server.py")], "connect_timeout": 30},
    }
    toolsets = {"profiles": {"default": {"toolsets": ["all"]}, "narrow": {"toolsets": ["pub"]}},
                "startup_wait": 30}
    write_config(directory / "config", upstreams, toolsets)
    async with serve_http(directory / "config", free_port(), ready=(200,)) as base:
        async with client(f"{base}/mcp") as warm:  # the whole fleet has registered once this lists
            assert "tool_search" in {t.name for t in (await warm.list_tools()).tools}
        yield Site(base, calls)


async def _answer(c: Client, name: str, arguments: dict[str, Any]) -> str:
    """What a client learns from calling `name`: the error or the result, as one comparable string."""
    try:
        result = await c.call_tool(name, arguments)
    except MCPError as error:
        return f"error {error.code} {error.message} {error.data}"
    return f"result error={result.is_error} {text(result)}"


async def _read(c: Client, uri: str) -> str:
    try:
        return f"read {(await c.read_resource(uri)).contents}"
    except MCPError as error:
        return f"error {error.code} {error.message}"


@pytest.mark.parametrize("with_header", [False, True], ids=["no-param-header", "param-header-sent"])
async def test_an_out_of_scope_tool_called_directly_over_2026_http_looks_like_a_name_that_does_not_exist(
        site: Site, with_header: bool) -> None:
    """Attacks 'a name outside the session's profile is indistinguishable from one that does not exist' (SPEC §8.1)."""
    arguments = {"region": "eu", "query": "q"}
    answers = []
    async with httpx2.AsyncClient(timeout=30) as http:
        for name in ("secret__regional_lookup", "ghost__regional_lookup"):
            headers = {"Mcp-Param-Region": "eu"} if with_header else {}
            status, body = await post(http, site.narrow, "tools/call", {"name": name, "arguments": arguments},
                                      headers=headers)
            answers.append((status, scrub(body, name)))
    assert answers[0] == answers[1]
    assert site.secret_was_called() == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_out_of_scope_tool_called_directly_looks_like_a_name_that_does_not_exist(
        site: Site, mode: str) -> None:
    """Attacks 'A session ... cannot ... call ... anything outside its profile', from an SDK client of each era."""
    arguments = {"region": "eu", "query": "q"}
    async with client(site.narrow, mode=mode) as c:
        await c.list_tools()
        hidden = await _answer(c, "secret__regional_lookup", arguments)
        ghost = await _answer(c, "ghost__regional_lookup", arguments)
        also_hidden = await _answer(c, "secret__wipe", {})
        also_ghost = await _answer(c, "ghost__wipe", {})
    assert scrub(hidden, "secret__regional_lookup") == scrub(ghost, "ghost__regional_lookup")
    assert scrub(also_hidden, "secret__wipe") == scrub(also_ghost, "ghost__wipe")
    assert site.secret_was_called() == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tool_call_of_an_out_of_scope_tool_looks_like_a_name_that_does_not_exist(site: Site, mode: str) -> None:
    """Attacks SPEC §8.1 through the bridge: `tool_call` on an out-of-scope name answers as for a missing name."""
    arguments = {"region": "eu", "query": "q"}
    async with client(site.narrow, mode=mode) as c:
        hidden = await _answer(c, "tool_call", {"name": "secret__regional_lookup", "arguments": arguments})
        ghost = await _answer(c, "tool_call", {"name": "ghost__regional_lookup", "arguments": arguments})
    assert scrub(hidden, "secret__regional_lookup", "secret") == scrub(ghost, "ghost__regional_lookup", "ghost")
    assert site.secret_was_called() == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tool_describe_of_an_out_of_scope_tool_looks_like_a_name_that_does_not_exist(
        site: Site, mode: str) -> None:
    """Attacks SPEC §8.1 through the bridge: `tool_describe` reveals no schema and no hint that the name is real."""
    async with client(site.narrow, mode=mode) as c:
        hidden = await _answer(c, "tool_describe", {"names": ["secret__regional_lookup"]})
        ghost = await _answer(c, "tool_describe", {"names": ["ghost__regional_lookup"]})
    assert "x-mcp-header" not in hidden and "Region" not in hidden
    assert scrub(hidden, "secret__regional_lookup", "secret") == scrub(ghost, "ghost__regional_lookup", "ghost")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tool_search_never_names_an_out_of_scope_server_or_tool(site: Site, mode: str) -> None:
    """Attacks 'It cannot search ... anything outside its profile': no query finds `secret` or `clock`."""
    queries = ["regional lookup", "secret__regional_lookup", "wipe", "clock alarm", "secret"]
    async with client(site.narrow, mode=mode) as c:
        listed = json.dumps([t.model_dump(mode="json") for t in (await c.list_tools()).tools])
        found = await c.call_tool("tool_search", {"queries": queries})
    answer = json.loads(text(found))
    answer.pop("queries", None)
    for group in answer.get("results", []):
        group.pop("query", None)  # the client's own words, echoed
    revealed = json.dumps(answer)
    for leaked in ("secret", "regional", "wipe", "clock", "alarm"):
        assert leaked not in revealed and leaked not in listed


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_out_of_scope_resource_reads_like_one_that_does_not_exist(site: Site, mode: str) -> None:
    """Attacks 'cannot ... read ... anything outside its profile', by raw and qualified URI."""
    async with client(site.narrow, mode=mode) as c:
        listed = json.dumps([r.model_dump(mode="json") for r in (await c.list_resources()).resources])
        pairs = [("secret://vault", "ghost://vault"),
                 ("toolbridge://server/secret/secret://vault", "toolbridge://server/ghost/secret://vault"),
                 ("ui://clock/clock/app.html", "ui://ghost/clock/app.html")]
        for hidden_uri, ghost_uri in pairs:
            hidden, ghost = await _read(c, hidden_uri), await _read(c, ghost_uri)
            assert hidden.startswith("error") and "says" not in hidden and "<html" not in hidden
            assert scrub(hidden, hidden_uri, "secret", "clock") == scrub(ghost, ghost_uri, "ghost")
    assert "secret" not in listed and "ui://" not in listed


async def test_an_out_of_scope_resource_cannot_be_subscribed_to(site: Site) -> None:
    """Attacks 'cannot ... subscribe to ... anything outside its profile' (handshake-era subscribe)."""
    async with client(site.narrow, mode="legacy") as c:
        outcomes = []
        for uri in ("secret://vault", "ghost://vault"):
            try:
                await c.subscribe_resource(uri)
                outcomes.append("subscribed")
            except MCPError as error:
                outcomes.append(scrub(f"{error.code} {error.message}", uri, "secret", "ghost"))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] != "subscribed"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_out_of_scope_prompt_and_its_completions_look_like_ones_that_do_not_exist(
        site: Site, mode: str) -> None:
    """Attacks 'cannot ... complete anything outside its profile' and prompts/get outside it."""
    async with client(site.narrow, mode=mode) as c:
        listed = json.dumps([p.model_dump(mode="json") for p in (await c.list_prompts()).prompts])
        answers = []
        for name in ("secret__leak", "ghost__leak"):
            try:
                got = await c.get_prompt(name)
                answers.append(f"prompt {got.messages}")
            except MCPError as error:
                answers.append(scrub(f"{error.code} {error.message}", name, "secret", "ghost"))
            try:
                done = await c.complete(types.PromptReference(type="ref/prompt", name=name),
                                        argument={"name": "x", "value": ""})
                answers.append(f"completion {done.completion.values}")
            except MCPError as error:
                answers.append(scrub(f"{error.code} {error.message}", name, "secret", "ghost"))
    assert "secret" not in listed
    assert answers[0] == answers[2] and answers[1] == answers[3]
    assert "secret prompt" not in answers[0] and "secret-value" not in answers[1]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_app_callback_cannot_reach_a_server_outside_the_profile(site: Site, mode: str) -> None:
    """Attacks 'An app of a server outside the profile reaches nothing.' (docs/mcp-apps.md)"""
    async with client(site.narrow, mode=mode) as c:
        tick = await _answer(c, "tick", {"seconds": 1})
        ghost = await _answer(c, "tock", {"seconds": 1})
        qualified = await _answer(c, "clock__tick", {"seconds": 1})
        qualified_ghost = await _answer(c, "ghost__tick", {"seconds": 1})
    assert "ticked" not in tick + qualified
    assert scrub(tick, "tick") == scrub(ghost, "tock")
    assert scrub(qualified, "clock__tick") == scrub(qualified_ghost, "ghost__tick")


async def test_a_forged_mcp_name_header_cannot_smuggle_an_out_of_scope_call(site: Site) -> None:
    """Attacks SPEC §8.1 'No header ... chosen by the client selects another owner' with a forged Mcp-Name."""
    async with httpx2.AsyncClient(timeout=30) as http:
        for forged in ("pub__echo", "tool_call", "secret__regional_lookup"):
            status, body = await post(http, site.narrow, "tools/call",
                                      {"name": "secret__wipe", "arguments": {}},
                                      headers={"Mcp-Name": forged, "Mcp-Param-Region": "eu"})
            assert "secret:wipe" not in json.dumps(body), (forged, status, body)
    assert site.secret_was_called() == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tool_texts_reach_the_model_without_invisible_or_control_characters(site: Site, mode: str) -> None:
    """Attacks 'Tool texts lose Unicode TAG, bidi, zero-width and C0/C1 control characters'."""
    async with client(site.narrow, mode=mode) as c:
        listed = json.dumps([t.model_dump(mode="json") for t in (await c.list_tools()).tools], ensure_ascii=False)
        described = await _answer(c, "tool_describe", {"names": ["pub__echo"]})
        searched = await _answer(c, "tool_search", {"queries": ["echo text back"]})
    assert "pub__echo" in described and "pub__echo" in searched
    for output in (listed, described, searched):
        decoded = json.loads(json.dumps(output))
        for character in HIDDEN:
            assert character not in decoded and json.dumps(character)[1:-1] not in decoded
