"""Server→client requests reach the call that caused them, and no other user: over HTTP, 2026-era clients.

toolbridge runs as `serve --transport http` wires it (on 127.0.0.1, with or without OAuth) in front
of the `MCPServer` fixture over stdio in the handshake era, whose tools sample through the
connection with nothing linking a request to its call. Two users call at once, again and again;
each user's sampling callback answers in its own name and records what it was asked.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port, serve_app
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from servers.jwt_issuer import Issuer, issuer_app

from proxy.app import run_gateway
from proxy.config import Config, ToolsetsConfig, UpstreamConfig
from proxy.downstream import ChangeNotifier, Handlers, HttpApp, ProtectedResource, build_server, transport_security

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "servers" / "mcpserver_fixture.py"
ROUNDS = 100


def _settings(issuer: Issuer | None) -> ToolsetsConfig:
    auth = {"auth": {"issuer": issuer.base, "audience": issuer.audience, "jwks_url": f"{issuer.base}/jwks.json"}} \
        if issuer is not None else {}
    return ToolsetsConfig.model_validate({"core": ["*"], "tool_search": {"enabled": "off"}, **auth})


@asynccontextmanager
async def _toolbridge(tmp_path: Path, port: int, issuer: Issuer | None) -> AsyncIterator[str]:
    upstream = UpstreamConfig(name="asker", command=sys.executable, args=(str(FIXTURE),), protocol="legacy",
                              prefix=False, connect_timeout=30)
    settings = _settings(issuer)
    config = Config(directory=tmp_path, upstreams={"asker": upstream}, toolsets=settings)
    async with run_gateway(config) as gateway, anyio.create_task_group() as tg:
        notifier = ChangeNotifier(gateway.views)
        await tg.start(notifier.run)
        handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready, startup_wait=5,
                            notices=gateway.notices)
        await tg.start(handlers.run)
        resource = ProtectedResource(settings.auth, tmp_path) if settings.auth is not None else None
        app = HttpApp(build_server(handlers), security=transport_security("127.0.0.1"), auth_token=None,
                      has_profile=gateway.views.has_profile, health=gateway.health, resource=resource)
        async with serve_app(app, port) as base:
            with anyio.fail_after(30):
                await gateway.fleet.ready.wait()
            yield f"{base}/mcp"
        tg.cancel_scope.cancel()


@asynccontextmanager
async def _deployment(tmp_path: Path, oauth: bool) -> AsyncIterator[tuple[str, Issuer | None]]:
    issuer_port, port = free_port(), free_port()
    if not oauth:
        async with _toolbridge(tmp_path, port, None) as url:
            yield url, None
        return
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}", audience=f"http://127.0.0.1:{port}/mcp")
    async with serve_app(issuer_app(issuer), issuer_port), _toolbridge(tmp_path, port, issuer) as url:
        yield url, issuer


class User:
    """One user's 2026-era client: its sampling callback answers `<name>:<prompt>` and records each prompt."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[str] = []

    async def sample(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        prompt = params.messages[0].content
        text = prompt.text if isinstance(prompt, types.TextContent) else "?"
        self.asked.append(text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text",
                                                                                     text=f"{self.name}:{text}"),
                                         model="m")

    @asynccontextmanager
    async def client(self, url: str, issuer: Issuer | None) -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {issuer.token(sub=self.name)}"} if issuer is not None else {}
        async with httpx2.AsyncClient(headers=headers) as http, \
                Client(streamable_http_client(url, http_client=http), sampling_callback=self.sample) as client:
            assert client.protocol_version == "2026-07-28"
            yield client


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def _call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    return not result.is_error, _text(result)


@pytest.mark.parametrize("oauth", [True, False], ids=["two-oauth-users", "two-anonymous-clients"])
async def test_concurrent_users_never_get_each_others_sampling_requests(tmp_path: Path, oauth: bool) -> None:
    alice, bob = User("alice"), User("bob")
    outcomes: dict[str, list[tuple[bool, str]]] = {"alice": [], "bob": []}
    async with _deployment(tmp_path, oauth) as (url, issuer), \
            alice.client(url, issuer) as a, bob.client(url, issuer) as b:
        with anyio.fail_after(30):
            assert await _call(a, "whoami_sampling", tag="alice-alone") == (True, "alice:alice-alone")

        async def one(user: User, client: Client, tag: str) -> None:
            outcomes[user.name].append(await _call(client, "whoami_sampling", tag=tag))

        with anyio.fail_after(240):
            for i in range(ROUNDS):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(one, alice, a, f"alice-{i}")
                    tg.start_soon(one, bob, b, f"bob-{i}")
    assert [p for p in alice.asked if not p.startswith("alice-")] == []
    assert [p for p in bob.asked if not p.startswith("bob-")] == []
    for name, results in outcomes.items():
        crossed = [text for ok, text in results if ok and not text.startswith(f"{name}:{name}-")]
        assert crossed == [], f"{name} got another user's answer"
        refused = [text for ok, text in results if not ok]
        assert all("reached no downstream caller" in text for text in refused), refused[:3]


@asynccontextmanager
async def _listening(url: str, issuer: Issuer, name: str, heard: list[str]) -> AsyncIterator[Client]:
    """A handshake-era client of user `name` that set log level debug and records each log message's text."""
    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(str(params.data))

    headers = {"Authorization": f"Bearer {issuer.token(sub=name)}"}
    async with httpx2.AsyncClient(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http), mode="legacy", logging_callback=on_log) as client:
        await client.set_logging_level("debug")
        yield client


async def test_concurrent_users_never_get_each_others_upstream_log_messages(tmp_path: Path) -> None:
    """A handshake-era upstream's log messages name no call: with two calls in flight none is claimed, and an
    OAuth user must not be shown what may be the other user's."""
    heard: dict[str, list[str]] = {"alice": [], "bob": []}
    async with _deployment(tmp_path, True) as (url, issuer), \
            _listening(url, issuer, "alice", heard["alice"]) as a, _listening(url, issuer, "bob", heard["bob"]) as b:
        assert issuer is not None
        with anyio.fail_after(30):
            assert _text(await a.call_tool("whoami_logging", {"tag": "alice-alone"})) == "alice-alone"
        with anyio.fail_after(120):
            for i in range(ROUNDS // 4):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(a.call_tool, "whoami_logging", {"tag": f"alice-{i}"})
                    tg.start_soon(b.call_tool, "whoami_logging", {"tag": f"bob-{i}"})
            await anyio.sleep(0.5)  # messages no call claimed are delivered on their own
    assert heard["alice"][:2] == ["alice-alone started", "alice-alone done"]  # one call in flight: claimed
    assert [m for m in heard["alice"] if not m.startswith("alice-")] == []
    assert [m for m in heard["bob"] if not m.startswith("bob-")] == []


async def test_a_request_state_is_refused_from_another_principal_and_when_altered(tmp_path: Path) -> None:
    alice, bob = User("alice"), User("bob")
    answer = types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="forged"),
                                       model="m")
    async with _deployment(tmp_path, True) as (url, issuer), alice.client(url, issuer) as a, \
            bob.client(url, issuer) as b:
        with anyio.fail_after(30):
            first = await a.session.call_tool("whoami_sampling", {"tag": "alice-1"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
            (key,) = first.input_requests or {}
            state = first.request_state
            tampered = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
            for client, sent in ((b, state), (a, tampered)):
                with pytest.raises(MCPError) as refused:
                    await client.session.call_tool("whoami_sampling", {"tag": "alice-1"}, input_responses={key: answer},
                                                   request_state=sent, allow_input_required=True)
                assert refused.value.code == types.INVALID_PARAMS
            mine = types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="mine"),
                                             model="m")
            done = await a.session.call_tool("whoami_sampling", {"tag": "alice-1"}, input_responses={key: mine},
                                             request_state=state, allow_input_required=True)
    assert isinstance(done, types.CallToolResult) and _text(done) == "mine"


async def test_a_late_request_of_a_cancelled_call_reaches_no_other_caller(tmp_path: Path) -> None:
    alice, bob = User("alice"), User("bob")
    async with _deployment(tmp_path, True) as (url, issuer), alice.client(url, issuer) as a, \
            bob.client(url, issuer) as b:
        with anyio.fail_after(30):
            with anyio.move_on_after(0.2):
                await a.call_tool("late_sampling", {"tag": "alice-late", "delay": 0.6})
            ok, text = await _call(b, "whoami_sampling", tag="bob-1", delay=1.2)
    assert "alice-late" not in bob.asked and "alice-late" not in alice.asked
    assert not ok and "reached no downstream caller" in text


async def test_a_request_its_upstream_gave_up_on_is_not_handed_to_the_client(tmp_path: Path) -> None:
    """The upstream's own timeouts: requests it stopped waiting for while the client was away are dropped."""
    alice = User("alice")
    answer = types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="x"), model="m")
    async with _deployment(tmp_path, False) as (url, issuer), alice.client(url, issuer) as a:
        with anyio.fail_after(30):
            arguments = {"waits": [0.3, 0.3, 20]}
            first = await a.session.call_tool("impatient_sampling", arguments, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            await anyio.sleep(1.0)  # try-0 and try-1 time out upstream meanwhile; try-2 waits
            responses = dict.fromkeys(first.input_requests or {}, answer)
            second = await a.session.call_tool("impatient_sampling", arguments, input_responses=responses,
                                               request_state=first.request_state, allow_input_required=True)
            assert isinstance(second, types.InputRequiredResult)
            prompts = [request.params.messages[0].content.text for request in (second.input_requests or {}).values()
                       if isinstance(request, types.CreateMessageRequest)]
            assert prompts == ["try-2"]
            done = await a.session.call_tool("impatient_sampling", arguments,
                                             input_responses=dict.fromkeys(second.input_requests or {}, answer),
                                             request_state=second.request_state, allow_input_required=True)
    assert isinstance(done, types.CallToolResult) and _text(done) == "answered try-2"
