"""The HTTP endpoint as an OAuth protected resource: metadata, 401/403, JWT checks, profile by claim.

toolbridge runs as `serve --transport http` wires it, on 127.0.0.1 with one stdio upstream; tokens
are signed with a locally generated RSA key whose JWKS a local HTTP server publishes. The SDK
client test knows nothing but the URL: it discovers the authorization server through the
protected-resource metadata, registers, gets consent and connects, and its profile follows the
`groups` claim of the token it was issued.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from conftest import free_port, serve_app
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from servers.harness import stdio_config
from servers.jwt_issuer import Issuer, JwtAuthServer, SigningKey, issuer_app
from servers.oauth_upstream import consent

from proxy import cli
from proxy.app import run_gateway
from proxy.config import Config, ToolsetsConfig, load_toolsets
from proxy.downstream import (
    ChangeNotifier,
    Handlers,
    HttpApp,
    ProtectedResource,
    build_server,
    transport_security,
)
from proxy.downstream.http import _access_tokens
from proxy.errors import ConfigError

pytestmark = pytest.mark.anyio

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
OPS_TOOLS = ["calc__echo"]


def toolsets(issuer: Issuer, **auth: Any) -> ToolsetsConfig:
    return ToolsetsConfig.model_validate({
        "toolsets": {"ops": {"tools": OPS_TOOLS}},
        "profiles": {"default": {"context_tokens": 1_000_000}, "opsonly": {"toolsets": ["ops"]}},
        "tool_search": {"enabled": "off"},
        "auth": {"issuer": issuer.base, "audience": issuer.audience, "jwks_url": f"{issuer.base}/jwks.json",
                 "scopes_required": ["mcp"], "profile_claim": "groups",
                 "profiles": {"admins": "default", "ops-team": "opsonly"}, **auth},
    })


@asynccontextmanager
async def toolbridge(tmp_path: Path, port: int, settings: ToolsetsConfig) -> AsyncIterator[str]:
    """The gateway and its HTTP app as `serve --transport http` wires them (the e2e test runs that)."""
    config = Config(directory=tmp_path, upstreams={"calc": stdio_config("calc")}, toolsets=settings)
    assert settings.auth is not None
    async with run_gateway(config) as gateway, anyio.create_task_group() as tg:
        notifier = ChangeNotifier(gateway.views)
        await tg.start(notifier.run)
        handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready, startup_wait=5)
        await tg.start(handlers.run)
        app = HttpApp(build_server(handlers), security=transport_security("127.0.0.1"), auth_token=None,
                      has_profile=gateway.views.has_profile, health=gateway.health,
                      resource=ProtectedResource(settings.auth, tmp_path))
        async with serve_app(app, port) as base:
            with anyio.fail_after(20):
                await gateway.fleet.ready.wait()
            yield base
        tg.cancel_scope.cancel()


@asynccontextmanager
async def deployment(
    tmp_path: Path, *, introspection_secret: str | None = None, **auth: Any
) -> AsyncIterator[tuple[Issuer, str]]:
    """An issuer publishing its JWKS (and introspecting), and toolbridge trusting it (by
    introspection with `introspection_secret`, else by the JWKS)."""
    issuer_port, port = free_port(), free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}", audience=f"http://127.0.0.1:{port}/mcp")
    if introspection_secret is not None:
        endpoint = {"url": f"{issuer.base}/introspect", "client_id": "toolbridge"}
        auth = {"jwks_url": None, "introspection": {**endpoint, "client_secret": introspection_secret}, **auth}
    async with serve_app(issuer_app(issuer), issuer_port), toolbridge(tmp_path, port, toolsets(issuer, **auth)) as base:
        yield issuer, base


async def post(url: str, token: str | None) -> httpx2.Response:
    headers = {**HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    async with httpx2.AsyncClient() as http:
        return await http.post(url, json=INIT, headers=headers)


async def tool_names(url: str, token: str) -> list[str]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        return sorted(tool.name for tool in (await client.list_tools()).tools)


async def test_metadata_is_published_and_a_missing_token_gets_the_hint(tmp_path: Path) -> None:
    async with deployment(tmp_path) as (issuer, base), httpx2.AsyncClient() as http:
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            metadata = (await http.get(base + path)).json()
            assert metadata["resource"] == issuer.audience
            assert metadata["authorization_servers"] == [issuer.base] and metadata["scopes_supported"] == ["mcp"]
        refused = await post(f"{base}/mcp", None)
        assert refused.status_code == 401
        hint = refused.headers["www-authenticate"]
        assert hint.startswith("Bearer ")
        assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in hint


def forged(issuer: Issuer, **header: Any) -> str:
    """Claims that would pass, signed with a key the issuer never published (under its kid)."""
    impostor = SigningKey(kid=issuer.keys[0].kid)
    return issuer.token(key=impostor, **header)


def unsigned(issuer: Issuer) -> str:
    claims = jwt.decode(issuer.token(), options={"verify_signature": False})
    return jwt.encode(claims, None, algorithm="none", headers={"kid": issuer.keys[0].kid})


def hmac_with_the_public_key(issuer: Issuer) -> str:
    """The classic confusion: HS256 keyed with the (public) RSA key. PyJWT refuses to mint it, so by hand."""
    def part(value: dict[str, Any]) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")

    claims = jwt.decode(issuer.token(), options={"verify_signature": False})
    signing_input = part({"alg": "HS256", "typ": "JWT", "kid": issuer.keys[0].kid}) + b"." + part(claims)
    public = issuer.keys[0].private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    signature = base64.urlsafe_b64encode(hmac.new(public, signing_input, hashlib.sha256).digest()).rstrip(b"=")
    return (signing_input + b"." + signature).decode()


BAD_TOKENS = {
    "wrong audience": lambda i: i.token(aud="https://another.example/mcp"),
    "wrong issuer": lambda i: i.token(iss="https://evil.example"),
    "expired": lambda i: i.token(lifetime=-120),
    "not yet valid": lambda i: i.token(nbf=int(time.time()) + 600),
    "no expiry": lambda i: i.token(exp=None),
    "bad signature": forged,
    "alg none": unsigned,
    "hmac with the public key": hmac_with_the_public_key,
    "not a jwt": lambda i: "opaque-token-value",
}


async def test_bad_tokens_are_401(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with deployment(tmp_path) as (issuer, base):
        tokens = {kind: make(issuer) for kind, make in BAD_TOKENS.items()}
        answers = {kind: await post(f"{base}/mcp", token) for kind, token in tokens.items()}
        assert {kind: a.status_code for kind, a in answers.items()} == dict.fromkeys(BAD_TOKENS, 401)
        assert all('error="invalid_token"' in a.headers["www-authenticate"] for a in answers.values())
        assert (await post(f"{base}/mcp", issuer.token(groups=["admins"]))).status_code == 200
    assert [kind for kind, token in tokens.items() if token in caplog.text] == []


async def test_a_token_without_the_required_scope_is_403(tmp_path: Path) -> None:
    async with deployment(tmp_path) as (issuer, base):
        refused = await post(f"{base}/mcp", issuer.token(scope="profile email", groups=["admins"]))
        assert refused.status_code == 403
        assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
        assert (await post(f"{base}/mcp", issuer.token(scp=["mcp"], scope=None, groups=["admins"]))).status_code == 200


async def test_the_profile_follows_the_group_claim(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with deployment(tmp_path) as (issuer, base):
        admin, ops = issuer.token(groups=["admins"]), issuer.token(sub="bob", groups=["staff", "ops-team"])
        everything = await tool_names(f"{base}/mcp", admin)
        assert len(everything) > len(OPS_TOOLS) and set(OPS_TOOLS) < set(everything)
        assert await tool_names(f"{base}/mcp", ops) == OPS_TOOLS
        assert await tool_names(f"{base}/mcp/opsonly", ops) == OPS_TOOLS
        assert (await post(f"{base}/mcp/default", ops)).status_code == 403  # a path cannot widen a user's scope
        assert (await post(f"{base}/mcp", issuer.token(groups=["visitors"]))).status_code == 403
        assert (await post(f"{base}/mcp", issuer.token(groups="admins"))).status_code == 200  # a single string
    assert [t for t in issuer.minted if t in caplog.text] == []


async def test_without_a_session_pins_are_kept_per_user(tmp_path: Path) -> None:
    """2026-era HTTP requests carry no session: what a user pinned is promoted for that user's token
    subject, whichever connection asks, and never for another user with the same client."""
    issuer_port, port = free_port(), free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}", audience=f"http://127.0.0.1:{port}/mcp")
    settings = ToolsetsConfig.model_validate({
        "profiles": {"default": {"promote": 2}},
        "auth": {"issuer": issuer.base, "audience": issuer.audience, "jwks_url": f"{issuer.base}/jwks.json"},
    })
    async with serve_app(issuer_app(issuer), issuer_port), toolbridge(tmp_path, port, settings) as base:
        alice, bob = issuer.token(sub="alice"), issuer.token(sub="bob")
        assert "calc__pid" not in await tool_names(f"{base}/mcp", alice)
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {alice}"}) as http, \
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            assert client.protocol_version == "2026-07-28"
            assert not (await client.call_tool("tool_call", {"name": "calc__pid", "arguments": {}})).is_error
            assert "calc__pid" not in await tool_names(f"{base}/mcp", alice)  # a call alone promotes nothing
            pinned = await client.call_tool("tool_describe", {"names": ["calc__pid"], "pin": True})
            assert not pinned.is_error
        assert "calc__pid" in await tool_names(f"{base}/mcp", alice)
        assert "calc__pid" not in await tool_names(f"{base}/mcp", bob)


async def test_the_key_set_is_cached_and_refetched_for_a_new_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_access_tokens, "JWKS_REFETCH_AFTER", 0.0)
    async with deployment(tmp_path) as (issuer, base):
        for _ in range(5):
            assert (await post(f"{base}/mcp", issuer.token(groups=["admins"]))).status_code == 200
        assert issuer.jwks_fetches == 1
        issuer.keys.insert(0, SigningKey())  # the issuer rotates: a new signing key, published
        assert (await post(f"{base}/mcp", issuer.token(groups=["admins"]))).status_code == 200
        assert issuer.jwks_fetches == 2


async def test_keys_can_come_from_a_file(tmp_path: Path) -> None:
    issuer = Issuer("https://id.example", audience=f"http://127.0.0.1:{(port := free_port())}/mcp")
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [issuer.keys[0].jwk()]}))
    settings = toolsets(issuer, jwks_url=None, jwks_file="jwks.json")
    async with toolbridge(tmp_path, port, settings) as base:
        assert (await post(f"{base}/mcp", issuer.token(groups=["admins"]))).status_code == 200
        assert (await post(f"{base}/mcp", forged(issuer))).status_code == 401


async def test_introspection_vouches_for_tokens_and_its_answers_are_cached(tmp_path: Path) -> None:
    async with deployment(tmp_path, introspection_secret=Issuer.introspection_secret) as (issuer, base):
        ops = issuer.token(groups=["ops-team"])
        assert await tool_names(f"{base}/mcp", ops) == OPS_TOOLS
        asked = issuer.introspections
        assert await tool_names(f"{base}/mcp", ops) == OPS_TOOLS
        assert issuer.introspections == asked  # one question per token, not per request
        refused = {kind: (await post(f"{base}/mcp", BAD_TOKENS[kind](issuer))).status_code
                   for kind in ("wrong audience", "expired", "bad signature", "not a jwt")}
        assert refused == dict.fromkeys(refused, 401)
        assert issuer.jwks_fetches == 0


async def test_introspection_with_wrong_credentials_lets_nothing_in(tmp_path: Path) -> None:
    async with deployment(tmp_path, introspection_secret="wrong") as (issuer, base):
        assert (await post(f"{base}/mcp", issuer.token(groups=["admins"]))).status_code == 401
        assert issuer.introspections == 1


async def test_an_sdk_client_discovers_the_issuer_and_gets_its_profile(tmp_path: Path) -> None:
    issuer_port, port = free_port(), free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}", audience=f"http://127.0.0.1:{port}/mcp")
    server = JwtAuthServer(issuer.base, issuer=issuer, claims={"groups": ["ops-team"]})
    async with serve_app(issuer_app(issuer, server), issuer_port), \
            toolbridge(tmp_path, port, toolsets(issuer)) as base:
        callback_port = free_port()
        arrived: dict[str, Any] = {}

        async def open_url(url: str) -> None:
            async with serve_app(capture_callback(arrived), callback_port):
                await consent(url)

        async def wait_for_code() -> Any:
            return arrived["result"]

        metadata = OAuthClientMetadata(redirect_uris=[f"http://127.0.0.1:{callback_port}/callback"],  # type: ignore[list-item]
                                       client_name="a team member's client")
        auth = OAuthClientProvider(f"{base}/mcp", metadata, MemoryStorage(), open_url, wait_for_code)
        async with httpx2.AsyncClient(auth=auth) as http, \
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
        assert names == OPS_TOOLS and server.consents == 1 and len(server.clients) == 1


def capture_callback(arrived: dict[str, Any]) -> Any:
    from mcp.client.auth import AuthorizationCodeResult
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def callback(request: Any) -> PlainTextResponse:
        arrived["result"] = AuthorizationCodeResult(code=request.query_params["code"],
                                                    state=request.query_params.get("state"))
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/callback", callback)])


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


@pytest.mark.parametrize(("toolsets_yaml", "extra", "message"), [
    ("profiles: [broken", [], "toolsets.yaml is invalid"),
    ("auth: {issuer: 'https://id.example', audience: 'https://tb.example/mcp', jwks_url: 'https://id.example/k'}",
     ["--auth-token", "x"], "drop --auth-token"),
])
def test_http_serving_refuses_to_lose_its_auth(tmp_path: Path, toolsets_yaml: str, extra: list[str],
                                               message: str) -> None:
    (tmp_path / "toolsets.yaml").write_text(toolsets_yaml)
    with pytest.raises(SystemExit, match=message):
        cli.main(["serve", "--transport", "http", "--config-dir", str(tmp_path), *extra])


@pytest.mark.parametrize(("auth", "message"), [
    ({"jwks_url": None}, "give one of 'jwks_url', 'jwks_file' or 'introspection'"),
    ({"jwks_file": "k.json"}, "give one of 'jwks_url', 'jwks_file' or 'introspection'"),
    ({"profiles": {"admins": "nosuch"}}, "unknown profiles: nosuch"),
    ({"profile_claim": None}, "set it"),
    ({"audience": "api://toolbridge"}, "must be the http(s) URL"),
])
def test_auth_settings_are_checked(auth: dict[str, Any], message: str) -> None:
    issuer = Issuer("https://id.example", audience="https://tb.example/mcp")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        toolsets(issuer, **auth)



def test_the_auth_block_takes_its_secret_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "toolsets.yaml"
    path.write_text("auth:\n  issuer: https://id.example\n  audience: https://tb.example/mcp\n  introspection:\n"
                    "    url: https://id.example/introspect\n    client_id: toolbridge\n"
                    "    client_secret: ${TB_INTROSPECTION_SECRET}\n")
    settings, _ = load_toolsets(path, {"TB_INTROSPECTION_SECRET": "from-the-environment"})
    assert settings.auth and settings.auth.introspection
    assert settings.auth.introspection.client_secret == "from-the-environment"
    with pytest.raises(ConfigError, match=r"yaml:7: .*TB_INTROSPECTION_SECRET .*in auth.introspection.client_secret"):
        load_toolsets(path, {})
