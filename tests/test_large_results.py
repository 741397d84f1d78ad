"""Large results (issue 13, build 11): a preview and a `toolbridge://results/<id>` link, read back in pages."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client, MCPError, types
from mcp.server.lowlevel import Server

from proxy.config import LargeResultsConfig, ToolsetsConfig
from proxy.downstream import RESULTS_PREFIX, LargeResults
from proxy.downstream.calls._large import PREVIEW_CHARS
from proxy.replicated import MemoryResultStore

pytestmark = pytest.mark.anyio

BIG = "".join(f"line {i:06}\n" for i in range(25_000))  # 300,000 characters
CONFIG = ToolsetsConfig(large_results=LargeResultsConfig(max_chars=100_000))


class Blob(Upstream):
    """An upstream whose `dump` returns BIG text beside an image, and whose `small` returns a little."""

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self.tools)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            if params.name == "small":
                return types.CallToolResult(content=[types.TextContent(type="text", text="tiny")])
            image = types.ImageContent(type="image", data="aGk=", mime_type="image/png")
            return types.CallToolResult(content=[types.TextContent(type="text", text=BIG), image])

        return Server(self.name, on_list_tools=list_tools, on_call_tool=call_tool)


def blob() -> Blob:
    return Blob("blob", [tool("dump", "Dump a big log."), tool("small", "A small answer.")])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_large_result_is_a_preview_and_a_link_readable_in_pages(mode: str) -> None:
    async with gateway([blob()], CONFIG) as harness, Client(harness.server, mode=mode) as client:
        result = await client.call_tool("tool_call", {"name": "blob__dump", "arguments": {}})
        assert not result.is_error
        preview, image, link = result.content
        assert isinstance(preview, types.TextContent) and preview.text.startswith(BIG[:PREVIEW_CHARS])
        assert len(preview.text) < PREVIEW_CHARS + 400 and "?page=3" in preview.text
        assert isinstance(image, types.ImageContent)
        assert isinstance(link, types.ResourceLink) and link.uri.startswith(RESULTS_PREFIX)
        pages = []
        for page in (1, 2, 3):
            read = await client.read_resource(f"{link.uri}?page={page}")
            (contents,) = read.contents
            assert isinstance(contents, types.TextResourceContents) and contents.meta == {
                "toolbridge/page": page, "toolbridge/pages": 3}
            pages.append(contents.text)
        assert "".join(pages) == BIG
        with pytest.raises(MCPError, match="out of range"):
            await client.read_resource(f"{link.uri}?page=4")
        with pytest.raises(MCPError, match="unknown, or expired"):
            await client.read_resource(f"{RESULTS_PREFIX}{'0' * 32}")


async def test_small_results_pass_unchanged() -> None:
    async with gateway([blob()], CONFIG) as harness, Client(harness.server) as client:
        result = await client.call_tool("tool_call", {"name": "blob__small", "arguments": {}})
        assert [c.text for c in result.content if isinstance(c, types.TextContent)] == ["tiny"]


async def test_stored_results_expire_and_the_store_is_bounded() -> None:
    store = MemoryResultStore(ttl=0.2, max_chars=250_000)
    large = LargeResults(store, 100_000)
    big = types.CallToolResult(content=[types.TextContent(type="text", text=BIG)])
    first = (await large.cut(big, "me")).content[-1]
    second = (await large.cut(big, "me")).content[-1]
    assert isinstance(first, types.ResourceLink) and isinstance(second, types.ResourceLink)
    with pytest.raises(ValueError, match="unknown, or expired"):  # the oldest made room for the newest
        await large.read(first.uri, "me")
    assert (await large.read(second.uri, "me")).contents
    with anyio.fail_after(5):
        while True:
            try:
                await large.read(second.uri, "me")
            except ValueError:
                break
            await anyio.sleep(0.05)
