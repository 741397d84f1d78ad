"""Over stdio (`toolbridge serve --profile narrow`, one client per process), an out-of-scope name answers
exactly like a name that does not exist, in both eras (SPEC §8.1; known defect 2 is the HTTP side)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters, stdio_client, types
from rt import REPO, scrub, text, tool, upstream, write_config

pytestmark = pytest.mark.anyio

REGIONAL = tool("regional_lookup", "Look a customer up in one region.",
                region={"type": "string", "x-mcp-header": "Region"})


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("stdio") / "config"
    upstreams = {"pub": upstream("pub", tools=[tool("echo"), tool("lookup")]),
                 "secret": upstream("secret", tools=[REGIONAL, tool("wipe")])}
    return write_config(directory, upstreams, {"profiles": {"narrow": {"toolsets": ["pub"]}}, "startup_wait": 30})


@asynccontextmanager
async def _stdio(config: Path, mode: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, cwd=str(REPO), env={"TOOLBRIDGE_LOG_LEVEL": "warning"},
                                   args=["-m", "proxy", "serve", "--config-dir", str(config), "--profile", "narrow"])
    async with Client(stdio_client(params, errlog=sys.stderr), mode=mode,
                      client_info=types.Implementation(name="ide", version="1")) as c:
        await c.list_tools()
        yield c


async def _answer(c: Client, name: str, arguments: dict[str, object]) -> str:
    try:
        result = await c.call_tool(name, arguments)
    except MCPError as error:
        return f"error {error.code} {error.message}"
    return f"result error={result.is_error} {text(result)}"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_stdio_an_out_of_scope_tool_looks_like_a_name_that_does_not_exist(config: Path, mode: str) -> None:
    """Attacks 'a name outside the session's profile is indistinguishable from one that does not exist' over stdio."""
    args = {"region": "eu"}
    async with _stdio(config, mode) as c:
        pairs = [(await _answer(c, "secret__regional_lookup", args), await _answer(c, "ghost__regional_lookup", args)),
                 (await _answer(c, "tool_call", {"name": "secret__regional_lookup", "arguments": args}),
                  await _answer(c, "tool_call", {"name": "ghost__regional_lookup", "arguments": args})),
                 (await _answer(c, "tool_describe", {"names": ["secret__regional_lookup"]}),
                  await _answer(c, "tool_describe", {"names": ["ghost__regional_lookup"]}))]
    for hidden, ghost in pairs:
        assert scrub(hidden, "secret__regional_lookup", "secret") == scrub(ghost, "ghost__regional_lookup", "ghost")
