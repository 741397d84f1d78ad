"""A `toolbridge://results/<id>` link is readable only by the principal and profile that produced it.

Two toolbridge HTTP apps share one result store, as replicas share Redis: one checks OAuth tokens
(profiles by the `groups` claim), the other is an open loopback endpoint (profiles by path). Real
SDK clients over 127.0.0.1 produce a large result and pass its link around; everyone but its owner
is told the link is unknown, the answer for a link that never existed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from conftest import free_port, serve_app
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from servers.harness import stdio_config
from servers.jwt_issuer import Issuer, issuer_app

from proxy.app import run_gateway
from proxy.config import Config, ToolsetsConfig
from proxy.downstream import (
    ChangeNotifier,
    Handlers,
    HttpApp,
    LargeResults,
    ProtectedResource,
    build_server,
    transport_security,
)
from proxy.replicated import MemoryResultStore

pytestmark = pytest.mark.anyio

MAX_CHARS = 1_000
SIZE = 3_500  # four pages
UNKNOWN = "unknown, or expired"


@dataclass
class Deployment:
    issuer: Issuer
    oauth: str  # base URL of the app that checks tokens
    open: str  # base URL of the loopback app without per-user tokens


def settings(issuer: Issuer) -> ToolsetsConfig:
    """`ops` holds only `calc__echo`: the `data` server is outside the `opsonly` profile's scope."""
    return ToolsetsConfig.model_validate({
        "toolsets": {"ops": {"tools": ["calc__echo"]}},
        "profiles": {"default": {"context_tokens": 1_000_000}, "opsonly": {"toolsets": ["ops"]}},
        "tool_search": {"enabled": "off"},
        "large_results": {"max_chars": MAX_CHARS},
        "auth": {"issuer": issuer.base, "audience": issuer.audience, "jwks_url": f"{issuer.base}/jwks.json",
                 "profile_claim": "groups", "profiles": {"admins": "default", "ops-team": "opsonly"}},
    })


@asynccontextmanager
async def deployment(tmp_path: Path) -> AsyncIterator[Deployment]:
    issuer_port, oauth_port, open_port = free_port(), free_port(), free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}", audience=f"http://127.0.0.1:{oauth_port}/mcp")
    toolsets = settings(issuer)
    assert toolsets.auth is not None
    config = Config(directory=tmp_path, upstreams={"calc": stdio_config("calc"), "data": stdio_config("data")},
                    toolsets=toolsets)
    store = MemoryResultStore(ttl=600, max_chars=1_000_000)
    async with AsyncExitStack() as stack:
        gateway = await stack.enter_async_context(run_gateway(config))
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        await stack.enter_async_context(serve_app(issuer_app(issuer), issuer_port))
        bases = []
        for port, resource in ((oauth_port, ProtectedResource(toolsets.auth, tmp_path)), (open_port, None)):
            notifier = ChangeNotifier(gateway.views)
            await tg.start(notifier.run)
            handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready,
                                startup_wait=5, large_results=LargeResults(store, MAX_CHARS))
            await tg.start(handlers.run)
            app = HttpApp(build_server(handlers), security=transport_security("127.0.0.1"), auth_token=None,
                          has_profile=gateway.views.has_profile, health=gateway.health, resource=resource)
            bases.append(await stack.enter_async_context(serve_app(app, port)))
        with anyio.fail_after(20):
            await gateway.fleet.ready.wait()
        yield Deployment(issuer, *bases)


@asynccontextmanager
async def connect(url: str, token: str | None = None, mode: str = "legacy") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


async def large_link(client: Client) -> str:
    result = await client.call_tool("data__big", {"size": SIZE})
    link = result.content[-1]
    assert not result.is_error and isinstance(link, types.ResourceLink)
    return link.uri


async def read_all(client: Client, uri: str) -> str:
    pages = []
    for page in range(1, -(-SIZE // MAX_CHARS) + 1):
        contents = (await client.read_resource(f"{uri}?page={page}")).contents[0]
        assert isinstance(contents, types.TextResourceContents)
        pages.append(contents.text)
    return "".join(pages)


async def refused(client: Client, uri: str) -> bool:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(f"{uri}?page=2")
    return caught.value.error.code == types.INVALID_PARAMS and UNKNOWN in caught.value.error.message


async def test_a_result_link_is_refused_to_another_user_another_scope_and_anonymous(tmp_path: Path) -> None:
    async with deployment(tmp_path) as site:
        issuer = site.issuer
        alice = issuer.token(sub="alice", groups=["admins"])
        async with connect(f"{site.oauth}/mcp", alice) as owner:
            uri = await large_link(owner)
            assert await read_all(owner, uri) == "x" * SIZE
        async with connect(f"{site.oauth}/mcp", issuer.token(sub="alice", groups=["admins"]), "auto") as again:
            assert again.protocol_version == "2026-07-28"  # no session: the same user, a new token
            assert await read_all(again, uri) == "x" * SIZE
        async with connect(f"{site.oauth}/mcp", issuer.token(sub="bob", groups=["admins"])) as bob:
            assert await refused(bob, uri)
        async with connect(f"{site.oauth}/mcp", issuer.token(sub="bob", groups=["admins"]), "auto") as bob:
            assert await refused(bob, uri)
        async with connect(f"{site.oauth}/mcp", issuer.token(sub="alice", groups=["ops-team"])) as narrower:
            assert await refused(narrower, uri)  # alice herself, in a profile without the `data` server
        async with connect(f"{site.open}/mcp", mode="auto") as anonymous:
            assert await refused(anonymous, uri)


async def test_on_an_endpoint_without_tokens_a_link_stays_in_its_profile(tmp_path: Path) -> None:
    async with deployment(tmp_path) as site:
        async with connect(f"{site.open}/mcp") as producer:
            uri = await large_link(producer)
        async with connect(f"{site.open}/mcp", mode="auto") as same_profile:
            assert await read_all(same_profile, uri) == "x" * SIZE
        async with connect(f"{site.open}/mcp/opsonly") as other_profile:
            assert await refused(other_profile, uri)
        async with connect(f"{site.oauth}/mcp", site.issuer.token(sub="alice", groups=["admins"])) as alice:
            assert await refused(alice, uri)  # a user with a token is not the anonymous producer
