"""One abusive upstream never stalls another: a healthy stdio upstream's calls, `tools/list` and `tool_search`
through the gateway stay fast while a hostile stdio upstream lists a 50 MB description or 200,000 tools (each
re-listed every second) or bursts 100,000 list_changed notifications; a schema nested 10,000 deep drops only
its own tool. Sizes are the issue's; `bench/hostile_upstreams.py` prints the same runs' p50/p99."""

from __future__ import annotations

import gc
import json
import logging
from pathlib import Path

import anyio
import pytest
from mcp import types

from bench.hostile_upstreams import ABUSES, Abused, abused
from proxy.upstream._caps import CUT_MARK, MAX_DESCRIPTION_CHARS, MAX_TOOLS
from proxy.upstream._tool_list import read_message

pytestmark = pytest.mark.anyio

P99_MS = 500.0  # the bound on a healthy call's delay
SECONDS = 8.0  # ~200 operations: their p99 is the third slowest
LIMIT = 90.0  # each run takes 10-25 s on a loaded 2-core machine


async def run(tmp_path: Path, name: str) -> Abused:
    """The bench's run of abuse `name`; one that does not end (the abused server's tools never all registered,
    a burst never answered) fails after `LIMIT`."""
    flags, burst, registered = ABUSES[name]
    # The objects the suite's earlier tests left in this process are not the gateway's: frozen, a collection of
    # them (~0.4-0.9 s late in a whole-suite run, the one sample over the bound) stays out of the measurement.
    gc.collect()
    gc.freeze()
    try:
        with anyio.fail_after(LIMIT):
            return await abused(tmp_path, flags, seconds=SECONDS, burst=burst, registered=registered)
    finally:
        gc.unfreeze()


@pytest.mark.alone
async def test_a_50_mb_description_is_cut_and_stalls_no_other_upstream(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        result = await run(tmp_path, "description")
    assert result.latency.p99 < P99_MS, result.latency
    assert "hostile__huge" in result.registered
    assert "1 tool descriptions cut to the cap of 65536 characters" in caplog.text


@pytest.mark.alone
async def test_200_000_tools_are_capped_and_stall_no_other_upstream(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        result = await run(tmp_path, "tools")
    assert result.latency.p99 < P99_MS, result.latency
    assert len([name for name in result.registered if name.startswith("hostile__")]) == MAX_TOOLS
    dropped = 200_002 - MAX_TOOLS
    assert f"server hostile: {dropped} tools dropped: over the caps of {MAX_TOOLS} tools" in caplog.text


@pytest.mark.alone
async def test_a_burst_of_100_000_list_changed_stalls_no_other_upstream(tmp_path: Path) -> None:
    result = await run(tmp_path, "burst")
    assert result.burst_done
    assert result.latency.p99 < P99_MS, result.latency


@pytest.mark.alone
async def test_a_schema_nested_10_000_deep_drops_only_that_tool(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        result = await run(tmp_path, "deep")
    assert {"hostile__echo", "hostile__burst", "hostile__fine"} <= result.registered
    assert "hostile__deep" not in result.registered
    assert "server hostile: tool 'deep' skipped: its definition nests deeper than 128 levels" in caplog.text
    assert result.latency.p99 < P99_MS, result.latency


@pytest.mark.parametrize("text", ["é" * (3 << 20), "ab" * (3 << 20), "line\\n" * (1 << 20)])
async def test_a_long_description_is_cut_to_whole_characters_without_decoding_it_whole(text: str) -> None:
    tools = [{"name": "long", "description": "@", "inputSchema": {"type": "object"}},
             {"name": "next", "inputSchema": {"type": "object"}}]
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}, ensure_ascii=False).encode()
    message = await read_message(line.replace(b'"@"', b'"' + text.encode() + b'"'), "s")
    assert isinstance(message, types.JSONRPCResponse)
    listed = message.result["tools"]
    assert [tool["name"] for tool in listed] == ["long", "next"]
    assert listed[0]["description"] == text.replace("\\n", "\n")[:MAX_DESCRIPTION_CHARS - len(CUT_MARK)] + CUT_MARK


async def test_a_large_call_result_is_read_whole() -> None:
    text = "z" * (3 << 20)  # a run free of quotes that a tool list would have shortened
    line = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": text}]}}).encode()
    message = await read_message(line, "s")
    assert isinstance(message, types.JSONRPCResponse)
    assert message.result["content"][0]["text"] == text
