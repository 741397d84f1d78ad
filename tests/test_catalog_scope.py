"""Resources and prompts through the in-process gateway: scope, ownership, the qualified form."""

from __future__ import annotations

import pytest
from inprocess import gateway
from mcp import Client, MCPError, types
from servers.conformance_fixture import build_server

from proxy.config import ProfileConfig, ToolsetsConfig

pytestmark = pytest.mark.anyio

ONLY_A = ToolsetsConfig(profiles={"default": ProfileConfig(toolsets=("mcp-a",))})


async def test_a_session_never_sees_or_reaches_resources_or_prompts_outside_its_scope() -> None:
    async with gateway([], ONLY_A, servers={"a": build_server(), "b": build_server()}) as harness, \
            Client(harness.server, mode="legacy") as client:
        uris = {r.uri for r in (await client.list_resources()).resources}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        with pytest.raises(MCPError) as read:
            await client.read_resource("toolbridge://server/b/test://static-text")
        with pytest.raises(MCPError) as got:
            await client.get_prompt("b__test_simple_prompt")
        with pytest.raises(MCPError) as completed:
            await client.complete(types.PromptReference(type="ref/prompt", name="b__test_prompt_with_arguments"),
                                  {"name": "arg1", "value": "p"})
    assert "test://static-text" in uris and not any("/b/" in uri for uri in uris)
    assert prompts == {"a__test_simple_prompt", "a__test_prompt_with_arguments",
                       "a__test_prompt_with_embedded_resource",
                       "a__test_prompt_with_image", "a__test_input_required_result_prompt"}
    assert {read.value.error.code, got.value.error.code, completed.value.error.code} == {types.INVALID_PARAMS}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_shared_uri_is_neither_servers_and_each_copy_is_reachable_qualified(mode: str) -> None:
    async with gateway([], servers={"a": build_server(), "b": build_server()}, mode=mode) as harness, \
            Client(harness.server, mode=mode) as client:
        uris = [r.uri for r in (await client.list_resources()).resources]
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        with pytest.raises(MCPError) as plain:
            await client.read_resource("test://static-text")
        own = await client.read_resource("toolbridge://server/a/test://static-text")
        other = await client.read_resource("toolbridge://server/b/test://static-text")
        templated = await client.read_resource("toolbridge://server/a/test://template/9/data")
        prompt = await client.get_prompt("b__test_prompt_with_arguments", {"arg1": "x", "arg2": "y"})
        completion = await client.complete(
            types.PromptReference(type="ref/prompt", name="a__test_prompt_with_arguments"),
            {"name": "arg1", "value": "pa"})
    assert "test://static-text" not in uris
    assert {"toolbridge://server/a/test://static-text", "toolbridge://server/b/test://static-text"} <= set(uris)
    assert templates == ["toolbridge://server/a/test://template/{id}/data",
                         "toolbridge://server/b/test://template/{id}/data"]
    assert plain.value.code == types.INVALID_PARAMS
    assert "toolbridge://server/a/test://static-text" in plain.value.message
    assert own.contents[0].text == other.contents[0].text == "This is the content of the static text resource."
    assert '"id": "9"' in templated.contents[0].text
    assert "x" in str(prompt.messages[0].content)
    assert completion.completion.values == ["paris", "park", "party"]
