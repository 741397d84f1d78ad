"""A token issuer for the downstream auth tests: a locally generated RSA key, its JWKS and an
introspection endpoint over HTTP, JWTs minted at will, and an authorization server (the SDK's
routes) that issues such JWTs."""

from __future__ import annotations

import base64
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import OAuthToken
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from servers.oauth_upstream import AuthServer


@dataclass
class SigningKey:
    kid: str = field(default_factory=lambda: secrets.token_hex(4))
    private: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(public_exponent=65537,
                                                                                          key_size=2048))

    def jwk(self) -> dict[str, Any]:
        public = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**public, "kid": self.kid, "alg": "RS256", "use": "sig"}

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        return jwt.encode(claims, self.private, algorithm="RS256", headers={"kid": self.kid, **header})


@dataclass
class Issuer:
    """Signs tokens for `audience`; `keys[0]` signs, every key in `keys` is published."""

    base: str
    audience: str
    keys: list[SigningKey] = field(default_factory=lambda: [SigningKey()])
    jwks_fetches: int = 0
    minted: list[str] = field(default_factory=list)
    introspections: int = 0
    introspection_secret: str = "introspection-secret"  # of the client "toolbridge"

    def token(self, *, lifetime: int = 300, key: SigningKey | None = None, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.base, "aud": self.audience, "sub": "alice", "iat": now, "exp": now + lifetime,
                "scope": "mcp", **claims}
        minted = (key or self.keys[0]).sign({k: v for k, v in body.items() if v is not None})
        self.minted.append(minted)
        return minted

    async def jwks(self, request: Request) -> JSONResponse:
        self.jwks_fetches += 1
        return JSONResponse({"keys": [key.jwk() for key in self.keys]})

    async def introspect(self, request: Request) -> JSONResponse:
        """RFC 7662 for the client `toolbridge`: any token this issuer signed that has not expired is active."""
        self.introspections += 1
        expected = "Basic " + base64.b64encode(f"toolbridge:{self.introspection_secret}".encode()).decode()
        if request.headers.get("authorization") != expected:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        token = str((await request.form())["token"])
        try:
            claims = jwt.decode(token, self.keys[0].private.public_key(), algorithms=["RS256"],
                                options={"verify_aud": False})
        except jwt.PyJWTError:
            return JSONResponse({"active": False})
        return JSONResponse({"active": True, **claims})


@dataclass
class JwtAuthServer(AuthServer):
    """The SDK-route authorization server of `oauth_upstream`, issuing `issuer`'s JWTs with `claims`."""

    issuer: Issuer | None = None
    claims: dict[str, Any] = field(default_factory=dict)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        assert self.issuer is not None
        access = self.issuer.token(scope=" ".join(scopes), client_id=client_id, **self.claims)
        self.issued.append(access)
        return OAuthToken(access_token=access, expires_in=300, scope=" ".join(scopes))


def issuer_app(issuer: Issuer, server: JwtAuthServer | None = None) -> Starlette:
    """`/jwks.json`, plus the authorization server's routes and consent page when `server` is given."""
    routes = [Route("/jwks.json", issuer.jwks), Route("/introspect", issuer.introspect, methods=["POST"])]
    if server is not None:
        options = ClientRegistrationOptions(enabled=True, valid_scopes=["mcp"], default_scopes=["mcp"])
        verbatim = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))
        issuer_url = verbatim.validate_python(issuer.base)
        routes += create_auth_routes(server, issuer_url, client_registration_options=options)
        routes.append(Route("/consent", server.consent_page, methods=["GET", "POST"]))
    return Starlette(routes=routes)
