"""Handshake-era HTTP sessions under caps: abandoned sessions make room instead of locking clients out.

Real uvicorn on 127.0.0.1; principals without auth are client addresses, so a second principal
connects from 127.0.0.2 (Linux routes all of 127/8 to loopback).
"""

from __future__ import annotations

from collections.abc import Hashable
from contextlib import AsyncExitStack
from pathlib import Path

import httpx2
import pytest
from conftest import free_port, serve_app
from inprocess import Upstream, tool
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from servers.jwt_issuer import Issuer, issuer_app
from starlette.types import Scope

from proxy.config import ToolsetsConfig
from proxy.downstream import HttpApp, ProtectedResource, principal_of, transport_security

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


def app(forgotten: list[Hashable], **caps: int) -> HttpApp:
    server = Upstream("echo", [tool("ping")]).server()
    return HttpApp(server, security=transport_security("127.0.0.1"), auth_token=None, has_profile=lambda _: False,
                   health=lambda: {"status": "ok"}, forget=forgotten.append, **caps)


def http_from(address: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(local_address=address))


async def abandoned_session(http: httpx2.AsyncClient, base: str) -> str:
    """Initialize, say initialized, and walk away (no DELETE, no stream)."""
    response = await http.post(f"{base}/mcp", json=INITIALIZE, headers=HEADERS)
    assert response.status_code == 200
    session = response.headers["mcp-session-id"]
    headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    assert (await http.post(f"{base}/mcp", json=INITIALIZED, headers=headers)).status_code == 202
    return session


async def alive(http: httpx2.AsyncClient, base: str, session: str) -> bool:
    headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    status = (await http.post(f"{base}/mcp", json=LIST, headers=headers)).status_code
    assert status in (200, 404)
    return status == 200


async def call_ping(http: httpx2.AsyncClient, base: str) -> None:
    async with Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy") as client:
        assert not (await client.call_tool("ping", {})).is_error


async def test_a_new_client_gets_in_past_the_abandoned_sessions_of_its_principal() -> None:
    forgotten: list[Hashable] = []
    async with serve_app(app(forgotten, max_sessions=100, max_sessions_per_principal=3)) as base, \
            http_from("127.0.0.1") as http:
        sessions = [await abandoned_session(http, base) for _ in range(5)]
        await call_ping(http, base)
        # Least recently active first: the two oldest made room for the next two, the third for the client
        # (whose own DELETE on leaving comes after).
        assert forgotten[:3] == sessions[:3] and len(forgotten) == 4
        assert [await alive(http, base, s) for s in sessions] == [False, False, False, True, True]


async def test_the_global_cap_evicts_the_flooding_principals_idle_sessions_not_anothers() -> None:
    forgotten: list[Hashable] = []
    async with serve_app(app(forgotten, max_sessions=5, max_sessions_per_principal=3)) as base, \
            http_from("127.0.0.1") as flooder, http_from("127.0.0.2") as other:
        idle_other = await abandoned_session(other, base)
        async with Client(streamable_http_client(f"{base}/mcp", http_client=other), mode="legacy") as active:
            for _ in range(20):
                await abandoned_session(flooder, base)
            assert not (await active.call_tool("ping", {})).is_error
            assert await alive(other, base, idle_other)
            second = await abandoned_session(other, base)  # under its own cap: room is made at the flooder's cost
            assert await alive(other, base, second) and await alive(other, base, idle_other)
            assert idle_other not in forgotten and second not in forgotten
        await call_ping(flooder, base)


async def test_sessions_with_a_request_in_flight_are_never_evicted() -> None:
    forgotten: list[Hashable] = []
    async with serve_app(app(forgotten, max_sessions=100, max_sessions_per_principal=2)) as base, \
            http_from("127.0.0.1") as http:
        sessions = [await abandoned_session(http, base) for _ in range(2)]
        async with AsyncExitStack() as streams:
            for session in sessions:
                headers = {"Accept": "text/event-stream", "mcp-session-id": session,
                           "mcp-protocol-version": "2025-11-25"}
                stream = await streams.enter_async_context(http.stream("GET", f"{base}/mcp", headers=headers))
                assert stream.status_code == 200
            refused = await http.post(f"{base}/mcp", json=INITIALIZE, headers=HEADERS)
            assert refused.status_code == 503
            assert forgotten == []


async def test_a_request_that_opens_no_session_evicts_nobody() -> None:
    forgotten: list[Hashable] = []
    async with serve_app(app(forgotten, max_sessions=100, max_sessions_per_principal=2)) as base, \
            http_from("127.0.0.1") as http:
        sessions = [await abandoned_session(http, base) for _ in range(2)]
        for junk in (b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}', b"not json"):
            assert (await http.post(f"{base}/mcp", content=junk, headers=HEADERS)).status_code == 400
        assert [await alive(http, base, s) for s in sessions] == [True, True] and forgotten == []


def test_principals_are_the_oauth_subject_at_its_issuer_else_the_token_else_the_address() -> None:
    def scope(token: AccessToken | None = None, bearer: str | None = None, address: str = "10.0.0.1") -> Scope:
        headers = [(b"authorization", f"Bearer {bearer}".encode())] if bearer else []
        return {"type": "http", "headers": headers, "client": (address, 5000),
                **({"user": AuthenticatedUser(token)} if token else {})}

    def token(client_id: str, subject: str | None, issuer: str = "https://a") -> AccessToken:
        return AccessToken(token="t", client_id=client_id, scopes=[], subject=subject, claims={"iss": issuer})

    alice = principal_of(scope(token("ide", "alice")))
    assert alice == principal_of(scope(token("cli", "alice"), address="10.0.0.2"))  # one user, two clients
    assert alice != principal_of(scope(token("ide", "alice", issuer="https://b")))
    assert alice != principal_of(scope(token("ide", "bob")))
    assert principal_of(scope(token("svc", None))) != principal_of(scope(token("svc2", None)))
    assert principal_of(scope(bearer="k1")) != principal_of(scope(bearer="k2"))
    assert "k1" not in principal_of(scope(bearer="k1"))
    assert principal_of(scope()) != principal_of(scope(address="10.0.0.2"))


async def test_under_oauth_each_subject_has_its_own_cap_and_evicted_sessions_are_closed(tmp_path: Path) -> None:
    issuer_port, port = free_port(), free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}", audience=f"http://127.0.0.1:{port}/mcp")
    auth = ToolsetsConfig.model_validate({"auth": {
        "issuer": issuer.base, "audience": issuer.audience, "jwks_url": f"{issuer.base}/jwks.json"}}).auth
    assert auth is not None
    forgotten: list[Hashable] = []
    served = HttpApp(Upstream("echo", [tool("ping")]).server(), security=transport_security("127.0.0.1"),
                     auth_token=None, has_profile=lambda _: False, health=lambda: {"status": "ok"},
                     resource=ProtectedResource(auth, tmp_path), forget=forgotten.append,
                     max_sessions=100, max_sessions_per_principal=2)
    async with serve_app(issuer_app(issuer), issuer_port), serve_app(served, port) as base:
        as_alice = httpx2.AsyncClient(headers={"Authorization": f"Bearer {issuer.token(sub='alice')}"})
        as_bob = httpx2.AsyncClient(headers={"Authorization": f"Bearer {issuer.token(sub='bob')}"})
        async with as_alice, as_bob:
            bobs = [await abandoned_session(as_bob, base) for _ in range(2)]
            alices = [await abandoned_session(as_alice, base) for _ in range(4)]
            assert [await alive(as_alice, base, s) for s in alices] == [False, False, True, True]
            assert [await alive(as_bob, base, s) for s in bobs] == [True, True]
    assert forgotten == alices[:2]  # closed in the SDK too: the DELETE carried alice's credential
