"""OAuth 2.1 to a remote upstream, through the SDK's `OAuthClientProvider` as an httpx2 `Auth`.

The SDK does the protocol: protected-resource and authorization-server metadata discovery,
the client's identity when no `client_id` is configured (the `client_metadata_url` document where
the authorization server takes one, dynamic client registration otherwise), authorization code +
PKCE with the `iss` check of the response (RFC 9207), credentials bound to their issuer, the token
refresh, and a fresh authorization on a 401. What is ours: where tokens live, per issuer
(`TokenStore`), refreshing a little *before* expiry (also for a token loaded after a restart),
and what happens when a person's consent is needed. While serving nobody can give it, so the
flow stops with `UpstreamNeedsAuth` naming `toolbridge login <server>`; `toolbridge login`
passes handlers that show the URL and take the code from the loopback redirect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import fields
from pathlib import Path

import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import OAuthClientMetadata

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamError, UpstreamNeedsAuth
from proxy.upstream.oauth._token_store import TokenStore

REFRESH_MARGIN = 60.0  # seconds before expiry a token is refreshed (at most half its lifetime)

OpenUrl = Callable[[str], Awaitable[None]]
WaitForCode = Callable[[], Awaitable[AuthorizationCodeResult]]


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


class _EarlyRefresh(OAuthContext):
    """An access token counts as expired `REFRESH_MARGIN` early, so the SDK refreshes it in time.

    The SDK loads stored tokens without their expiry; the store gives `expires_in` counted from
    the load, which is turned into the expiry here on first use.
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


def oauth_auth(
    config: UpstreamConfig, config_dir: Path, *,
    open_url: OpenUrl | None = None, wait_for_code: WaitForCode | None = None,
    on_needs_consent: Callable[[], None] | None = None,
) -> httpx2.Auth:
    """The httpx2 `Auth` for an `auth: oauth` upstream.

    Without `open_url`/`wait_for_code` (serving), a flow that needs the user calls
    `on_needs_consent` and raises `UpstreamNeedsAuth` instead of waiting for a person who is not there.
    """
    settings = config.auth
    assert settings is not None and config.url is not None

    async def needs_consent(_url: str) -> None:
        if on_needs_consent is not None:
            on_needs_consent()
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
    provider = OAuthClientProvider(
        config.url, metadata, store,
        redirect_handler=open_url or needs_consent, callback_handler=wait_for_code or no_code,
        client_metadata_url=settings.client_metadata_url,
    )
    provider.context = _EarlyRefresh(**{f.name: getattr(provider.context, f.name) for f in fields(OAuthContext)})
    context = provider.context
    store.issuer_of = lambda: str(context.oauth_metadata.issuer) if context.oauth_metadata is not None else None
    return provider
