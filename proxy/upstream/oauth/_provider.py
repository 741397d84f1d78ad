"""OAuth 2.1 to a remote upstream, through the SDK's `OAuthClientProvider` as an httpx2 `Auth`.

The SDK does the protocol: protected-resource and authorization-server metadata discovery,
the client's identity when no `client_id` is configured (the `client_metadata_url` document where
the authorization server takes one, dynamic client registration otherwise), authorization code +
PKCE with the `iss` check of the response (RFC 9207), credentials bound to their issuer, the token
refresh, a fresh authorization on a 401, and one asking for the union of the scopes on a 403
`insufficient_scope` (a step-up). What is ours: where tokens live, per issuer (`TokenStore`),
refreshing a little *before* expiry (also for a token loaded after a restart), how a configured
client authenticates at the token endpoint, and what happens when a person's consent is needed.
While serving nobody can give it, so the flow stops with `UpstreamNeedsAuth` naming `toolbridge
login <server>` and reports the scope it was about to ask for; a login passes handlers that show
the URL and take the code from the loopback redirect, and, after a step-up, that wider scope.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import fields
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import OAuthClientMetadata, OAuthMetadata

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamError, UpstreamNeedsAuth
from proxy.upstream.oauth._token_store import TokenStore

REFRESH_MARGIN = 60.0  # seconds before expiry a token is refreshed (at most half its lifetime)

OpenUrl = Callable[[str], Awaitable[None]]
WaitForCode = Callable[[], Awaitable[AuthorizationCodeResult]]
NeedsConsent = Callable[[str | None], None]  # told the scope the stopped flow was about to ask for


class _ReportedByUs(logging.Filter):
    """The SDK logs every flow that stops with a traceback; one stopped by our handlers (no consent
    while serving, a refused or missing redirect) is reported once, by the fleet or `login`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], UpstreamError))


logging.getLogger("mcp.client.auth.oauth2").addFilter(_ReportedByUs())


def redirect_uri(config: UpstreamConfig) -> str:
    assert config.auth is not None
    return f"http://127.0.0.1:{config.auth.redirect_port}/callback"


def token_store(config: UpstreamConfig, config_dir: Path) -> TokenStore:
    return TokenStore(config, config_dir, redirect_uri(config))


SECRET_METHODS = ("client_secret_basic", "client_secret_post")


def client_authentication(metadata: OAuthMetadata | None) -> str:
    """How a configured client secret authenticates at the token endpoint: the first secret method the
    authorization server lists (`token_endpoint_auth_methods_supported`), `client_secret_basic` where it
    lists none (the default of RFC 8414 §2, and the method RFC 6749 §2.3.1 has every server take)."""
    supported = (metadata.token_endpoint_auth_methods_supported if metadata is not None else None) or []
    return next((method for method in supported if method in SECRET_METHODS), "client_secret_basic")


class _Context(OAuthContext):
    """The SDK's flow state, with two rules of ours.

    An access token counts as expired `REFRESH_MARGIN` early, so the SDK refreshes it in time. The SDK
    loads stored tokens without their expiry; the store gives `expires_in` counted from the load, which
    is turned into the expiry here on first use.

    A configured client secret (the store gives it without a method: none can be chosen before the
    authorization server's metadata is known) authenticates the token request the way that server takes.
    """

    def is_token_valid(self) -> bool:
        tokens = self.current_tokens
        if tokens is None or not tokens.access_token:
            return False
        if self.token_expiry_time is None and tokens.expires_in is not None:
            self.update_token_expiry(tokens)
        if self.token_expiry_time is None:
            return True
        margin = min(REFRESH_MARGIN, (tokens.expires_in or 0) / 2)
        return time.time() < self.token_expiry_time - margin

    def prepare_token_auth(
        self, data: dict[str, str], headers: dict[str, str] | None = None
    ) -> tuple[dict[str, str], dict[str, str]]:
        client = self.client_info
        if client is None or not client.client_secret or client.token_endpoint_auth_method is not None:
            return super().prepare_token_auth(data, headers)
        self.client_info = client.model_copy(
            update={"token_endpoint_auth_method": client_authentication(self.oauth_metadata)})
        try:
            return super().prepare_token_auth(data, headers)
        finally:
            self.client_info = client


class _Provider(OAuthClientProvider):
    """The SDK's provider; given `scope`, the scope a refused request needed (a step-up), it authorizes
    anew whatever tokens are stored, and asks for that scope on top of the one the flow chose."""

    def __init__(self, *args: Any, scope: str | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scope = scope

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.scope is not None:  # the stored token lacks the scope: the upstream's 401 starts the flow
            self.context.current_tokens = None

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        self.context.client_metadata.scope = union_scopes(self.context.client_metadata.scope, self.scope)
        return await super()._perform_authorization_code_grant()


def oauth_auth(
    config: UpstreamConfig, config_dir: Path, *,
    open_url: OpenUrl | None = None, wait_for_code: WaitForCode | None = None,
    on_needs_consent: NeedsConsent | None = None, scope: str | None = None,
) -> httpx2.Auth:
    """The httpx2 `Auth` for an `auth: oauth` upstream.

    Without `open_url`/`wait_for_code` (serving), a flow that needs the user calls
    `on_needs_consent` with the scope it was about to ask for, and raises `UpstreamNeedsAuth` instead
    of waiting for a person who is not there. A login given that `scope` authorizes anew, asking for it.
    """
    settings = config.auth
    assert settings is not None and config.url is not None

    async def needs_consent(url: str) -> None:
        if on_needs_consent is not None:
            on_needs_consent(parse_qs(urlsplit(url).query).get("scope", [None])[0])
        raise UpstreamNeedsAuth(config.name)

    async def no_code() -> AuthorizationCodeResult:
        raise UpstreamNeedsAuth(config.name)

    metadata = OAuthClientMetadata(
        client_name="toolbridge",
        redirect_uris=[redirect_uri(config)],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=" ".join(settings.scopes) or None,
    )
    store = token_store(config, config_dir)
    provider = _Provider(
        config.url, metadata, store,
        redirect_handler=open_url or needs_consent, callback_handler=wait_for_code or no_code,
        client_metadata_url=settings.client_metadata_url, scope=scope,
    )
    provider.context = _Context(**{f.name: getattr(provider.context, f.name) for f in fields(OAuthContext)})
    context = provider.context
    store.issuer_of = lambda: str(context.oauth_metadata.issuer) if context.oauth_metadata is not None else None
    return provider
