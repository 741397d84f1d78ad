"""The HTTP app behind a load balancer: replica-marked session ids, readiness, and the drain of streams."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest
from conftest import serve_app
from inprocess import Upstream, gateway, tool
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from proxy.downstream import HttpApp, ReplicaMarker, transport_security

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


def app(replica: str | None = "r1", health: dict[str, Any] | None = None) -> HttpApp:
    server = Upstream("echo", [tool("ping")]).server()
    return HttpApp(server, security=transport_security("127.0.0.1"), auth_token=None, has_profile=lambda _: False,
                   health=lambda: health or {"status": "ok"}, replica=ReplicaMarker(replica) if replica else None)


async def open_session(http: httpx2.AsyncClient, base: str) -> str:
    response = await http.post(f"{base}/mcp", json=INITIALIZE, headers=HEADERS)
    assert response.status_code == 200
    return response.headers["mcp-session-id"]


async def test_session_ids_carry_the_replica_marker_and_only_the_home_replica_serves_them() -> None:
    async with serve_app(app("r1")) as base, httpx2.AsyncClient() as http:
        session = await open_session(http, base)
        marker, _, own = session.partition(".")
        assert marker == "r1" and len(own) == 32
        ok = await http.post(f"{base}/mcp", json=LIST, headers={**HEADERS, "mcp-session-id": session})
        assert ok.status_code == 200 and ok.headers["mcp-session-id"] == session
        for foreign in (f"r2.{own}", own, f"r10.{own}"):
            refused = await http.post(f"{base}/mcp", json=LIST, headers={**HEADERS, "mcp-session-id": foreign})
            assert refused.status_code == 404
            assert refused.json()["error"] == {"code": -32600, "message": "Session not found"}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_clients_of_both_eras_work_through_the_marker(mode: str) -> None:
    async with serve_app(app("toolbridge-0")) as base, Client(streamable_http_client(f"{base}/mcp"), mode=mode) as c:
        assert [t.name for t in (await c.list_tools()).tools] == ["ping"]
        result = await c.call_tool("ping", {"n": 1})
        assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "echo.ping [('n', 1)]"


def test_replica_ids_must_be_dns_labels() -> None:
    for bad in ("R1", "r.1", "-r1", "", "r1-", "a" * 64):
        with pytest.raises(ValueError, match="DNS label"):
            ReplicaMarker(bad)
    assert ReplicaMarker("toolbridge-12").mark(b"abc") == b"toolbridge-12.abc"


async def test_healthz_is_a_readiness_probe() -> None:
    async with serve_app(app(health={"status": "starting", "servers": {}})) as base, httpx2.AsyncClient() as http:
        starting = await http.get(f"{base}/healthz")
        assert starting.status_code == 503 and starting.json()["status"] == "starting"
    served = app()
    async with serve_app(served) as base, httpx2.AsyncClient() as http:
        ready = await http.get(f"{base}/healthz")
        assert ready.status_code == 200 and ready.json() == {"status": "ok", "replica": "r1"}
        served.drain.start()
        draining = await http.get(f"{base}/healthz")
        assert draining.status_code == 503 and draining.json()["status"] == "draining"


async def test_the_drain_ends_a_sessions_notification_stream_and_refuses_new_ones() -> None:
    served = app()
    async with serve_app(served) as base, httpx2.AsyncClient(timeout=30) as http:
        session = await open_session(http, base)
        stream_headers = {"Accept": "text/event-stream", "mcp-session-id": session,
                          "mcp-protocol-version": "2025-11-25"}
        with anyio.fail_after(20):
            async with http.stream("GET", f"{base}/mcp", headers=stream_headers) as stream:
                assert stream.status_code == 200
                served.drain.start()
                await stream.aread()  # the stream ends instead of holding the drain
            late = await http.get(f"{base}/mcp", headers=stream_headers)
            assert late.status_code == 503
            call = await http.post(f"{base}/mcp", json=LIST, headers={**HEADERS, "mcp-session-id": session})
            assert call.status_code == 200


@pytest.mark.parametrize("replica", [None, "r1"])
async def test_a_session_its_client_ends_leaves_nothing_behind(replica: str | None) -> None:
    async with gateway([Upstream("echo", [tool("ping")])]) as harness:
        served = HttpApp(harness.server, security=transport_security("127.0.0.1"), auth_token=None,
                         has_profile=lambda _: False, health=lambda: {"status": "ok"},
                         replica=ReplicaMarker(replica) if replica else None, forget=harness.handlers.forget)
        async with serve_app(served) as base, httpx2.AsyncClient() as http:
            session = await open_session(http, base)
            headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"}, LIST,
                            {"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "info"}}):
                assert (await http.post(f"{base}/mcp", json=message, headers=headers)).status_code in (200, 202)
            key = session.rpartition(".")[2]  # as the handlers know it: without the replica's mark
            assert harness.notifier.sessions == 1 and harness.handlers.logs.level(key) == "info"
            refused = await http.delete(f"{base}/mcp", headers={**headers, "mcp-protocol-version": "1999-01-01"})
            assert refused.status_code >= 400  # the session lives on, and so does what is kept for it
            assert harness.notifier.sessions == 1 and harness.handlers.logs.level(key) == "info"
            assert (await http.delete(f"{base}/mcp", headers=headers)).status_code < 300
            assert harness.notifier.sessions == 0 and harness.handlers.logs.level(key) is None
