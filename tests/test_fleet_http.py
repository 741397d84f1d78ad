"""Fleet over HTTP upstreams on 127.0.0.1: both eras, SSE and its fallback, restarts, bad endpoints."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import free_port, serve_app
from mcp import types
from servers.controllable import http_app, sse_app
from servers.harness import running_fleet, wait_for
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.routing import Route

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamError
from proxy.upstream import ServerStatus, UpstreamState

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]
SECRETS = ("SECRET-URL-TOKEN", "SECRET-HEADER-TOKEN", "SECRET-PASSWORD")


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def everything_shown(caplog: pytest.LogCaptureFixture, status: ServerStatus, *extra: str) -> str:
    """All a user or operator could see: the status, the errors, and toolbridge's own log lines."""
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("proxy")]
    return " ".join([status.reason, status.last_error or "", *extra, *ours])


def plain_app(status: int, body: str = "nope") -> Starlette:
    async def answer(request: Any) -> PlainTextResponse | HTMLResponse:
        return HTMLResponse(f"<html>{body}</html>", status_code=status)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST", "DELETE"])])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("app", "path", "transport", "expected"), [
    (http_app, "/mcp", None, "streamable-http"),
    (sse_app, "/sse", "sse", "sse"),
    (sse_app, "/sse", None, "sse"),  # Streamable HTTP is rejected (405): one fallback to SSE
])
async def test_remote_upstream_registers_calls_and_follows_changes(
    tmp_path: Path, mode: str, app: Any, path: str, transport: str | None, expected: str
) -> None:
    async with serve_app(app()) as base:
        config = UpstreamConfig(name="web", url=base + path, transport=transport,
                                headers={"X-Test": "1"})
        async with running_fleet([config], tmp_path, mode=mode) as (fleet, registry):
            with anyio.fail_after(10):
                await fleet.ready.wait()
            status = fleet.status()[0]
            assert (status.state, status.transport) == (UpstreamState.READY, expected), status
            assert text(await fleet.call_tool("web", "echo", {"text": "hi"})) == "hi"
            before = registry.generation
            await fleet.call_tool("web", "add_tool", {"name": "fresh"})
            with anyio.fail_after(5):
                await wait_for(lambda: "web__fresh" in registry.tools, registry)
            assert registry.generation == before + 1


@pytest.mark.parametrize("mode", MODES)
async def test_restarted_http_upstream_is_reconnected_transparently(tmp_path: Path, mode: str) -> None:
    port = free_port()
    config = UpstreamConfig(name="web", url=f"http://127.0.0.1:{port}/mcp")
    up, stop, down = anyio.Event(), anyio.Event(), anyio.Event()

    async def first_server() -> None:
        async with serve_app(http_app(), port):
            up.set()
            await stop.wait()
        down.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(first_server)
        with anyio.fail_after(10):
            await up.wait()
        async with running_fleet([config], tmp_path, mode=mode) as (fleet, registry):
            with anyio.fail_after(10):
                await fleet.ready.wait()
            assert text(await fleet.call_tool("web", "echo", {"text": "first"})) == "first"
            stop.set()
            with anyio.fail_after(10):
                await down.wait()
            async with serve_app(http_app(), port):  # a new server: new state, no old sessions
                with anyio.fail_after(10):
                    await fleet.wait_state("web", UpstreamState.READY)
                    result = await fleet.call_tool("web", "echo", {"text": "second"})
                assert text(result) == "second"
                assert "web__echo" in registry.tools


@pytest.mark.parametrize("mode", MODES)
async def test_dead_http_peer_is_noticed_by_the_keepalive(tmp_path: Path, mode: str) -> None:
    port = free_port()
    config = UpstreamConfig(name="web", url=f"http://127.0.0.1:{port}/mcp")
    up, stop = anyio.Event(), anyio.Event()

    async def server() -> None:
        async with serve_app(http_app(), port):
            up.set()
            await stop.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(server)
        with anyio.fail_after(10):
            await up.wait()
        async with running_fleet([config], tmp_path, mode=mode, keepalive=0.2) as (fleet, registry):
            with anyio.fail_after(10):
                await fleet.ready.wait()
            stop.set()  # no call follows: only the keepalive can notice
            with anyio.fail_after(3):
                await fleet.wait_state("web", UpstreamState.BACKOFF)
            assert "web__echo" in registry.tools  # still listed within the flake window


async def test_auth_failure_parks_at_once_without_leaking_secrets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="proxy")
    async with serve_app(plain_app(401, "unauthorized")) as base:
        config = UpstreamConfig(name="locked", url=f"{base}/mcp?token=SECRET-URL-TOKEN",
                                headers={"Authorization": "Bearer SECRET-HEADER-TOKEN"})
        async with running_fleet([config], tmp_path) as (fleet, _):
            with anyio.fail_after(5):
                await fleet.wait_state("locked", UpstreamState.PARKED)
            status = fleet.status()[0]
            assert "authentication failed (HTTP 401)" in status.reason
            with pytest.raises(UpstreamError) as caught:
                await fleet.call_tool("locked", "echo", {})
    shown = everything_shown(caplog, status, str(caught.value))
    assert not [s for s in SECRETS if s in shown]


@pytest.mark.parametrize("status", [404, 200])
async def test_non_mcp_endpoint_parks_at_once(tmp_path: Path, status: int) -> None:
    async with serve_app(plain_app(status)) as base:
        config = UpstreamConfig(name="site", url=f"{base}/mcp")
        async with running_fleet([config], tmp_path) as (fleet, _):
            with anyio.fail_after(5):
                await fleet.wait_state("site", UpstreamState.PARKED)
            assert "not an MCP endpoint" in fleet.status()[0].reason


async def test_unreachable_upstream_backs_off_without_leaking_secrets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="proxy")
    config = UpstreamConfig(name="gone", url=f"http://user:SECRET-PASSWORD@127.0.0.1:{free_port()}/mcp",
                            headers={"Authorization": "Bearer SECRET-HEADER-TOKEN"})
    async with running_fleet([config], tmp_path) as (fleet, _):
        with anyio.fail_after(5):
            await fleet.wait_state("gone", UpstreamState.BACKOFF)
        status = fleet.status()[0]
        assert "cannot reach the server" in status.reason
    shown = everything_shown(caplog, status)
    assert not [s for s in SECRETS if s in shown]
