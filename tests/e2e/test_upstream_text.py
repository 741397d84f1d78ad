"""Upstream text cannot forge toolbridge's output, and configured secrets never come back out.

`toolbridge serve --transport http` runs as a subprocess with two hostile upstreams written with
literal credentials: `forger` (stdio, `env: API_TOKEN: …`) and `keyed` (an SDK server on
127.0.0.1, `headers: X-Api-Key: …`); `broken` fails its `initialize` with forged text. Every error,
error result and log message they send carries terminal escapes, a carriage return and a line
break followed by a fake log record, and quotes the credential. None of that may reach serve's
stderr, `/status`, `toolbridge status` (both forms, plain and as tables on a terminal), or what a
client gets, in either protocol era; and each child's stderr log is the owner's only (0600).
"""

from __future__ import annotations

import os
import pty
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port, serve_app
from e2e.fleetdir import REPO, serve_http
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from servers.forger import FORGED_RECORD

pytestmark = pytest.mark.anyio

FORGER = str(REPO / "tests" / "servers" / "forger.py")
ENV_SECRET = "tok-literal-5c1d9e2a77"
HEADER_SECRET = "hdr-literal-0b8f3e91c4"
SECRETS = (ENV_SECRET, HEADER_SECRET)
EXPECTED_RAW = ("\x1b", "\r", "\x07")  # what must never appear raw


def assert_inert(text: str, where: str) -> None:
    """No raw control character, no line that starts like a log record, no credential."""
    assert not [c for c in EXPECTED_RAW if c in text], f"{where}: raw control characters in {text!r}"
    assert not [line for line in text.splitlines() if line.lstrip().startswith(FORGED_RECORD[:10])], where
    assert not [s for s in SECRETS if s in text], f"{where}: a configured secret in {text!r}"


def keyed_app() -> Any:
    """An SDK upstream that quotes the `X-Api-Key` it was sent, with forged text, in its errors."""
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object"}
        return types.ListToolsResult(tools=[types.Tool(name="fail", input_schema=schema),
                                            types.Tool(name="fail_result", input_schema=schema)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        key = ctx.request.headers.get("x-api-key", "")
        text = f"\x1b[2Jrejected {key}\r\n{FORGED_RECORD}"
        if params.name == "fail":
            raise MCPError(types.INTERNAL_ERROR, text)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

    return Server("keyed", on_list_tools=list_tools, on_call_tool=call_tool).streamable_http_app()


def write_config(directory: Path, keyed_url: str) -> Path:
    upstreams = directory / "upstreams"
    upstreams.mkdir(parents=True)
    forger = {"command": sys.executable, "args": [FORGER], "env": {"API_TOKEN": ENV_SECRET}, "connect_timeout": 20}
    (upstreams / "forger.yaml").write_text(yaml.safe_dump(forger))
    broken = {**forger, "args": [FORGER, "--fail-init"]}
    (upstreams / "broken.yaml").write_text(yaml.safe_dump(broken))
    (upstreams / "keyed.yaml").write_text(yaml.safe_dump({"url": keyed_url, "headers": {"X-Api-Key": HEADER_SECRET}}))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({"core": ["*"], "startup_wait": 15}))
    logs = directory / "logs"
    logs.mkdir()
    (logs / "forger.log").write_text("from an older run\n")
    (logs / "forger.log").chmod(0o644)
    return directory


@asynccontextmanager
async def serving(config: Path, stderr: Path) -> AsyncIterator[str]:
    with stderr.open("wb") as errors:
        async with serve_http(config, free_port(), "--log-level", "info", stderr=errors, ready=(200,)) as base:
            yield base


def texts(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def client_sees(base: str, mode: str) -> list[str]:
    """Every error text and log message a client gets from the hostile upstreams."""
    seen: list[str] = []
    logged = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen.append(f"{params.logger} {params.data}")
        logged.set()

    async with Client(streamable_http_client(f"{base}/mcp"), mode=mode, logging_callback=on_log) as client:
        if mode == "legacy":
            await client.set_logging_level("debug")
        for tool in ("forger__fail", "forger__fail_result", "keyed__fail", "keyed__fail_result"):
            result = await client.call_tool(tool, {})
            assert result.is_error, tool
            seen.append(texts(result))
        assert texts(await client.call_tool("forger__log", {})) == "logged"
        if mode == "legacy":
            with anyio.fail_after(10):
                await logged.wait()
    return seen


def run_status(*args: str, terminal: bool = False) -> str:
    """`toolbridge status …` as a person runs it: into a pipe, or onto a terminal (rich tables)."""
    command = [sys.executable, "-m", "proxy", "status", *args]
    env = {**os.environ, "COLUMNS": "400"}
    if not terminal:
        return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=REPO).stdout
    leader, follower = pty.openpty()
    try:
        subprocess.run(command, stdout=follower, stderr=subprocess.DEVNULL, timeout=120, env=env, cwd=REPO, check=True)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(leader)


def assert_table_inert(output: str, where: str) -> None:
    """On a terminal rich styles the tables itself: none of the forged sequences may be there."""
    for forged in ("\x1b]0;PWNED", "\x1b[2J", "\x1b[31m", "\x07"):
        assert forged not in output, where
    assert not [s for s in SECRETS if s in output], where
    assert "\\x1b" in output, where  # the escape is shown spelled out


async def test_upstream_text_is_inert_and_configured_secrets_stay_out(tmp_path: Path) -> None:
    stderr = tmp_path / "serve.stderr"
    async with serve_app(keyed_app()) as keyed:
        config = write_config(tmp_path / "config", f"{keyed}/mcp")
        async with serving(config, stderr) as base:
            for mode in ("legacy", "auto"):
                seen = await client_sees(base, mode)
                assert any("rejected" in text for text in seen) and any("boom" in text for text in seen)
                for text in seen:
                    assert_inert(text, f"{mode} client")
            async with httpx2.AsyncClient() as http:
                status = (await http.get(f"{base}/status")).text
            assert "broken" in status and "boom" in status
            assert_inert(status, "/status")
            by_url = run_status("--url", base)
            assert "broken" in by_url and "boom" in by_url
            assert_inert(by_url, "status --url")
            assert_table_inert(run_status("--url", base, terminal=True), "status --url on a terminal")
        one_shot = run_status("--config-dir", str(config), "--wait", "5")
        assert "boom" in one_shot
        assert_inert(one_shot, "status (one-shot fleet)")
        assert_table_inert(run_status("--config-dir", str(config), "--wait", "5", terminal=True),
                           "status (one-shot fleet) on a terminal")
    logged = stderr.read_text()
    assert "boom" in logged and "server broken" in logged
    assert_inert(logged, "serve stderr")
    for name in ("forger", "broken"):
        log = config / "logs" / f"{name}.log"
        assert "boom" in log.read_text() and stat.S_IMODE(log.stat().st_mode) == 0o600, name
