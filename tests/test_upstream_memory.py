"""What an upstream connection keeps alive after listing: nothing of the parsed answer.

A fleet of 50,000 tools must not hold every upstream's tools/list answer as parsed JSON (~6 KB a
tool), nor the SDK every tool's parsed output schema (~2 KB a tool with one). A parsed schema is a
dict, so each test gives a parameter a name nothing else in this process uses and counts the live
dicts that have it as a key.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import anyio
import pytest
from servers.harness import running_fleet

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamError
from proxy.upstream import connect
from proxy.upstream.connection._stdio import stdio_transport

pytestmark = pytest.mark.anyio

MARKER = "parameter_only_this_test_names"
CATALOG_SERVER = str(Path(__file__).parent / "servers" / "catalog_server.py")


def parsed_copies() -> int:
    """Live dicts with MARKER as a key: parsed copies of the upstream's schema."""
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is dict and MARKER in obj)


def catalog_upstream(tmp_path: Path, *, outputs: bool = False) -> UpstreamConfig:
    """An SDK server (both protocol eras) whose tools all take a MARKER parameter.

    `outputs`: the tools' output schema has MARKER instead (a string), and each call returns its
    arguments as structured content.
    """
    schema = {"type": "object", "properties": {MARKER: {"type": "string", "description": "Anything."}}}
    plain = {"type": "object", "properties": {"other": {"type": "string"}}}
    catalog = {"servers": {"s": {"tools": [
        {"name": f"tool_{i}", "description": f"Tool {i}.", "inputSchema": plain, "outputSchema": schema}
        if outputs else {"name": f"tool_{i}", "description": f"Tool {i}.", "inputSchema": schema}
        for i in range(20)]}}}
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog))
    flags = ("--structured",) if outputs else ()
    return UpstreamConfig(name="s", command=sys.executable,
                          args=(CATALOG_SERVER, "--catalog", str(path), "--server", "s", *flags))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_connection_lets_go_of_its_last_listing(tmp_path: Path, mode: str) -> None:
    async with connect(catalog_upstream(tmp_path), config_dir=tmp_path, log_dir=tmp_path / "logs", mode=mode) as conn:
        assert conn.modern is (mode == "auto")  # 2026 era: no ping, `server/discover` instead
        with anyio.fail_after(10):
            tools = await conn.list_tools()
        assert len(tools) == 20 and MARKER in tools[0].input_schema["properties"]
        del tools
        assert parsed_copies() > 0  # the SDK's read loop still holds the answer
        with anyio.fail_after(5):
            await conn.drop_last_answer()
        assert parsed_copies() == 0


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_output_schemas_are_parsed_only_for_the_tools_called(tmp_path: Path, mode: str) -> None:
    config = catalog_upstream(tmp_path, outputs=True)
    async with connect(config, config_dir=tmp_path, log_dir=tmp_path / "logs", mode=mode) as conn:
        with anyio.fail_after(10):
            tools = await conn.list_tools()
            await conn.drop_last_answer()
        assert tools[0].output_schema is not None and MARKER in tools[0].output_schema["properties"]
        del tools
        assert parsed_copies() == 0  # not even the SDK's copy, kept to validate results
        with anyio.fail_after(10):
            result = await conn.call_tool("tool_3", {MARKER: "text"}, timeout=10)
            assert result.structured_content == {MARKER: "text"}
            with pytest.raises(UpstreamError, match=r"tool 'tool_4': .*Invalid structured content"):
                await conn.call_tool("tool_4", {MARKER: 4}, timeout=10)  # the SDK still validates
            await conn.drop_last_answer()
        del result
        assert parsed_copies() == 2  # the schemas of the two tools called, the SDK's again


async def test_a_registered_fleet_holds_no_parsed_listing(tmp_path: Path) -> None:
    async with running_fleet([catalog_upstream(tmp_path)], tmp_path) as (fleet, registry):
        with anyio.fail_after(10):
            await fleet.ready.wait()
        entry = registry.get("s__tool_3")
        assert entry is not None
        assert parsed_copies() == 0
        assert entry.input_schema["properties"][MARKER] == {"type": "string", "description": "Anything."}


async def test_the_stdio_reader_keeps_no_message_it_passed_on(tmp_path: Path) -> None:
    answer = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"properties": {MARKER: {"type": "string"}}}})
    script = f"import sys; print({answer!r}, flush=True); sys.stdin.read()"  # then quiet until stdin closes
    config = UpstreamConfig(name="c", command=sys.executable, args=("-c", script))
    with (tmp_path / "c.log").open("w") as errlog:
        async with stdio_transport(config, tmp_path, errlog, lambda: None, lambda: None) as (read, _write):
            with anyio.fail_after(5):
                received = await read.receive()
            assert parsed_copies() == 1
            del received
            assert parsed_copies() == 0
