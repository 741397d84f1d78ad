"""An upstream that leaves `resultType` out of its results: each result is taken as `complete` (SEP-2322).

Before, the SDK's check of a 2026-07-28 answer against the schema refused the whole answer, so a caller of
either era got an error instead of the tool's image (the reference everything-server's streamed results).
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from conftest import free_port
from fleetdir import REPO, serve_http, write_config
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

SERVER = REPO / "tests" / "servers" / "no_result_type.py"


@pytest.mark.parametrize("protocol", ["auto", "2026"])
async def test_results_without_a_result_type_reach_callers_of_both_eras_whole(protocol: str, tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {"fixture": {"command": sys.executable, "args": [str(SERVER)], "prefix": False, "protocol": protocol}},
        {"core": ["*"]},
    )
    got: dict[str, types.CallToolResult] = {}
    with anyio.fail_after(60):
        async with serve_http(config, free_port()) as base:
            for mode in ("auto", "legacy"):
                async with Client(streamable_http_client(f"{base}/mcp"), mode=mode) as client:
                    while "test_image_content" not in {tool.name for tool in (await client.list_tools()).tools}:
                        await anyio.sleep(0.1)
                    got[mode] = await client.call_tool("test_image_content", {})
    for result in got.values():
        assert not result.is_error, result
        assert [(block.type, getattr(block, "mime_type", None)) for block in result.content] == [("image", "image/png")]
