"""How toolbridge identifies itself to an upstream's authorization server, and whose answers it takes.

A Client ID Metadata Document (the 2026-07-28 spec's recommendation) where the authorization
server takes one, dynamic registration otherwise; an authorization response from another issuer
is refused (RFC 9207); tokens and registrations are kept per issuer.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from conftest import free_port, serve_app
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import ValidationError
from servers.oauth_upstream import SCOPE, AuthServer, MovingResource, authorization_app, consent
from test_oauth_upstream import oauth_upstream

from proxy.config import OAuthSettings, UpstreamConfig
from proxy.errors import UpstreamError
from proxy.upstream import login

pytestmark = pytest.mark.anyio

DOCUMENT_URL = "https://toolbridge.example/oauth/client.json"


def identified_by_document(config: UpstreamConfig) -> UpstreamConfig:
    assert config.auth is not None
    auth = OAuthSettings(redirect_port=config.auth.redirect_port, client_metadata_url=DOCUMENT_URL)
    return config.model_copy(update={"auth": auth})


def publish_document(auth: AuthServer, config: UpstreamConfig) -> None:
    """What the operator hosts at `DOCUMENT_URL` (the authorization server fetches it)."""
    assert config.auth is not None
    auth.documents[DOCUMENT_URL] = OAuthClientInformationFull(
        client_id=DOCUMENT_URL, client_name="toolbridge", token_endpoint_auth_method="none", scope=SCOPE,
        redirect_uris=[f"http://127.0.0.1:{config.auth.redirect_port}/callback"],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"], response_types=["code"],
    )


async def test_the_metadata_document_is_the_client_id_where_the_server_takes_one(tmp_path: Path) -> None:
    async with oauth_upstream() as (auth, config):
        config = identified_by_document(config)
        publish_document(auth, config)
        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
    assert auth.clients == {}  # nothing registered
    assert auth.consents == 1
    assert {token.client_id for token in auth.access.values()} == {DOCUMENT_URL}


async def test_a_server_without_metadata_documents_gets_a_registration(tmp_path: Path) -> None:
    async with oauth_upstream() as (auth, config):
        with anyio.fail_after(20):
            await login(identified_by_document(config), tmp_path, show_url=consent)
    (registered,) = auth.clients
    assert registered != DOCUMENT_URL
    assert {token.client_id for token in auth.access.values()} == {registered}


async def test_an_authorization_response_from_another_issuer_is_refused(tmp_path: Path) -> None:
    async with oauth_upstream() as (auth, config):
        auth.iss = "https://elsewhere.example"
        with anyio.fail_after(20), pytest.raises(UpstreamError) as refused:
            await login(config, tmp_path, show_url=consent)
    assert auth.access == {}  # the code was never exchanged
    assert "authorization failed: Authorization response iss mismatch: https://elsewhere.example" in str(refused.value)


@pytest.mark.parametrize(("settings", "reason"), [
    ({"client_metadata_url": "http://toolbridge.example/client.json"}, "must be an https URL with a path"),
    ({"client_metadata_url": "https://toolbridge.example/"}, "must be an https URL with a path"),
    ({"client_metadata_url": DOCUMENT_URL, "client_id": "abc"}, "two client identities"),
])
def test_a_client_metadata_url_is_an_https_document_address_and_the_only_identity(
        settings: dict[str, str], reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        OAuthSettings.model_validate(settings)


async def test_an_upstream_that_moves_to_another_issuer_never_shows_it_the_first_ones_credentials(
        tmp_path: Path) -> None:
    ports = [free_port() for _ in range(3)]
    first, second = (AuthServer(f"http://127.0.0.1:{port}") for port in ports[:2])
    resource = MovingResource(f"http://127.0.0.1:{ports[2]}", first)
    config = UpstreamConfig(name="web", url=f"{resource.base}/mcp", auth=OAuthSettings(redirect_port=free_port()))
    async with serve_app(authorization_app(first), ports[0]), serve_app(authorization_app(second), ports[1]), \
            serve_app(resource.app(), ports[2]):
        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
        resource.auth = second
        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
    assert first.consents == second.consents == 1
    (registered,) = second.clients
    assert set(second.presented) <= {registered, *second.issued}  # nothing of the first issuer's
    record = json.loads((tmp_path / ".secrets" / "web.json").read_text())
    assert record["issuer"] == f"{second.base}/"
    assert record["tokens"]["access_token"] in second.access and record["client"]["client_id"] == registered
    (kept,) = record["other_issuers"].values()
    assert kept["tokens"]["access_token"] in first.access and kept["client"]["client_id"] in first.clients
