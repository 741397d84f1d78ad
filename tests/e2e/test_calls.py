"""Progress, cancellation, timeouts and raw results, end to end: client → toolbridge → upstream."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
import yaml
from fleetdir import serve_stdio
from mcp import Client, types

pytestmark = pytest.mark.anyio

CONTROLLABLE = str(Path(__file__).parent.parent / "servers" / "controllable.py")
MODES = ["legacy", "auto"]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "upstreams").mkdir()
    for name, timeout in (("ctl", 300), ("slow", 0.5)):
        spec = {"command": sys.executable, "args": [CONTROLLABLE], "timeout": timeout}
        (tmp_path / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "toolsets.yaml").write_text(yaml.safe_dump({"startup_wait": 20}))
    return tmp_path


def text(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


async def call(client: Client, name: str, arguments: dict[str, object], **options: object) -> types.CallToolResult:
    return await client.call_tool("tool_call", {"name": name, "arguments": arguments}, **options)  # type: ignore[arg-type]


async def wait_for_cancelled(client: Client, server: str) -> None:
    with anyio.fail_after(5):
        while text(await call(client, f"{server}__cancelled_count", {})) != "1":
            await anyio.sleep(0.05)


@pytest.mark.parametrize("mode", MODES)
async def test_progress_reaches_the_caller(config: Path, mode: str) -> None:
    seen: list[tuple[float, float | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total))

    async with Client(serve_stdio(config), mode=mode) as client:
        result = await call(client, "ctl__sleep", {"seconds": 0.3, "steps": 3}, progress_callback=progress)
        assert text(result) == "slept"
    assert seen == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_is_cancelled_upstream(config: Path, mode: str) -> None:
    async with Client(serve_stdio(config), mode=mode) as client:
        await client.list_tools()  # the fleet is up: the cancellation below hits a running call
        with anyio.move_on_after(0.5):
            await call(client, "ctl__sleep", {"seconds": 30, "steps": 30})
        await wait_for_cancelled(client, "ctl")


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_over_its_timeout_errors_and_is_cancelled_upstream(config: Path, mode: str) -> None:
    async with Client(serve_stdio(config), mode=mode) as client:
        result = await call(client, "slow__sleep", {"seconds": 10, "steps": 10})
        assert result.is_error and "0.5 s" in text(result) and "slow" in text(result)
        await wait_for_cancelled(client, "slow")


async def test_a_result_that_breaks_its_own_output_schema_is_a_tool_error(config: Path) -> None:
    async with Client(serve_stdio(config), mode="legacy") as client:
        result = await call(client, "ctl__bad_structured", {})
        assert result.is_error and "structured content" in text(result) and "ctl" in text(result)
