"""The HTTP endpoint as an OAuth protected resource (RFC 9728), built from the SDK's server-side auth.

The SDK gives the pieces: `ProtectedResourceMetadata` and its handler for
`/.well-known/oauth-protected-resource`, `BearerAuthBackend` over our `TokenVerifier` (JWT or
introspection), and
`RequireAuthMiddleware`, which answers 401 with `WWW-Authenticate: Bearer resource_metadata=…`
and 403 `insufficient_scope`. Ours is the last step: which profiles a token's claim allows, put in
the ASGI scope for the MCP route to choose from.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.config import ResourceAuth

ALLOWED_PROFILES_SCOPE_KEY = "toolbridge.allowed_profiles"
ROOT_METADATA_PATH = "/.well-known/oauth-protected-resource"


def claim_values(claims: Mapping[str, Any], name: str) -> set[str]:
    """The values of claim `name` (a dotted path reaches nested claims, e.g. `realm_access.roles`)."""
    value: Any = claims
    for part in name.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        return {value}
    return {str(v) for v in value} if isinstance(value, list) else set()


def allowed_profiles(settings: ResourceAuth, claims: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The profiles this token's claim maps to, in config order; None when profiles are not by claim."""
    if not settings.profile_claim:
        return None
    values = claim_values(claims, settings.profile_claim)
    return tuple(dict.fromkeys(profile for value, profile in settings.profiles.items() if value in values))


class _ProfilesFromClaim:
    """Puts the authenticated token's allowed profiles into the scope for the MCP route."""

    def __init__(self, app: ASGIApp, settings: ResourceAuth) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope["user"]
        assert isinstance(user, AuthenticatedUser)  # RequireAuthMiddleware let only those through
        allowed = allowed_profiles(self.settings, user.access_token.claims or {})
        await self.app({**scope, ALLOWED_PROFILES_SCOPE_KEY: allowed}, receive, send)


class ProtectedResource:
    """Metadata at the well-known paths, and `protect(app)`: a valid token with the required scopes."""

    def __init__(self, settings: ResourceAuth, config_dir: Path) -> None:
        from proxy.downstream.http._access_tokens import (  # jwt: only with `auth:`
            IntrospectionVerifier,
            JwtVerifier,
            KeySet,
        )

        self.settings = settings
        self.verifier: TokenVerifier = (
            IntrospectionVerifier(settings) if settings.introspection is not None
            else JwtVerifier(settings, KeySet(settings, config_dir))
        )
        self.metadata = ProtectedResourceMetadata.model_validate({  # validated as strings: issuers stay verbatim
            "resource": settings.resource_url,
            "authorization_servers": [settings.issuer],
            "scopes_supported": list(settings.scopes_required) or None,
            "resource_name": "toolbridge",
        })
        self.metadata_url = build_resource_metadata_url(self.metadata.resource)
        self.metadata_paths = {ROOT_METADATA_PATH, urlparse(str(self.metadata_url)).path}
        self.metadata_app = cors_middleware(ProtectedResourceMetadataHandler(self.metadata).handle, ["GET", "OPTIONS"])

    def protect(self, app: ASGIApp) -> ASGIApp:
        required = RequireAuthMiddleware(_ProfilesFromClaim(app, self.settings), list(self.settings.scopes_required),
                                         self.metadata_url)
        return AuthenticationMiddleware(required, backend=BearerAuthBackend(self.verifier))
