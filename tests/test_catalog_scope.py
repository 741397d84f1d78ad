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
                       "a__test_prompt_with_embedded_resource", "a__test_prompt_with_image"}
    assert {read.value.error.code, got.value.error.code, completed.value.error.code} == {types.INVALID_PARAMS}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_shared_uri_belongs_to_the_first_server_and_the_other_copy_is_reachable_qualified(mode: str) -> None:
    async with gateway([], servers={"a": build_server(), "b": build_server()}, mode=mode) as harness, \
            Client(harness.server, mode=mode) as client:
        uris = [r.uri for r in (await client.list_resources()).resources]
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        plain = await client.read_resource("test://static-text")
        other = await client.read_resource("toolbridge://server/b/test://static-text")
        templated = await client.read_resource("test://template/9/data")
        prompt = await client.get_prompt("b__test_prompt_with_arguments", {"arg1": "x", "arg2": "y"})
        completion = await client.complete(
            types.PromptReference(type="ref/prompt", name="a__test_prompt_with_arguments"),
            {"name": "arg1", "value": "pa"})
    assert uris.count("test://static-text") == 1 and "toolbridge://server/b/test://static-text" in uris
    assert templates == ["test://template/{id}/data", "toolbridge://server/b/test://template/{id}/data"]
    assert plain.contents[0].text == other.contents[0].text == "This is the content of the static text resource."
    assert '"id": "9"' in templated.contents[0].text
    assert "x" in str(prompt.messages[0].content)
    assert completion.completion.values == ["paris", "park", "party"]
