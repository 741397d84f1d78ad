"""Access tokens presented to the HTTP endpoint: JWTs checked against a JWKS, or opaque tokens
the issuer vouches for by introspection (RFC 7662); issuer, audience and time either way.

Both verifiers are the SDK's `TokenVerifier`: they answer an `AccessToken` carrying the claims
(for the profile choice) and scopes (for the SDK's scope check), or None for any token that
fails, whatever the reason, so nothing about a bad token leaks to its presenter. Only asymmetric
keys are trusted: the key set is public, so an HMAC "key" from it would let anyone sign.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
from mcp.server.auth.provider import AccessToken

from proxy.config import ResourceAuth

logger = logging.getLogger(__name__)

JWKS_TTL = 300.0  # seconds a fetched key set is trusted before it is fetched again
JWKS_REFETCH_AFTER = 30.0  # an unknown `kid` (a key rotation) refetches at most this often
LEEWAY = 30  # seconds of clock skew allowed on exp / nbf / iat
INTROSPECTION_CACHE_SECONDS = 30.0  # an active answer is reused this long (never past the token's exp)
INTROSPECTION_CACHE_SIZE = 4096
_SYMMETRIC = ("oct",)


class KeySet:
    """The issuer's signing keys from `jwks_url` or `jwks_file`, cached, refetched on rotation.

    A failed fetch keeps the keys already known (and is logged); tokens signed with keys never
    seen are refused until a fetch succeeds.
    """

    def __init__(self, settings: ResourceAuth, config_dir: Path) -> None:
        self.url = settings.jwks_url
        self.file = config_dir / settings.jwks_file if settings.jwks_file else None
        self.keys: list[jwt.PyJWK] = []
        self.fetches = 0
        self._fetched_at = -float("inf")
        self._lock = anyio.Lock()

    async def key_for(self, kid: str | None) -> jwt.PyJWK | None:
        if anyio.current_time() - self._fetched_at > JWKS_TTL:
            await self._refresh(since=self._fetched_at)
        key = self._find(kid)
        if key is None and anyio.current_time() - self._fetched_at > JWKS_REFETCH_AFTER:
            await self._refresh(since=self._fetched_at)
            key = self._find(kid)
        return key

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            return self.keys[0] if len(self.keys) == 1 else None
        return next((key for key in self.keys if key.key_id == kid), None)

    async def _refresh(self, since: float) -> None:
        async with self._lock:
            if self._fetched_at != since:
                return  # another request refreshed while this one waited
            self._fetched_at = anyio.current_time()
            self.fetches += 1
            try:
                document = await self._load()
                keys = jwt.PyJWKSet.from_dict(document).keys
            except (OSError, ValueError, httpx2.HTTPError, jwt.PyJWTError) as exc:
                logger.warning("auth: cannot load the signing keys from %s: %s", self.url or self.file, exc)
                return
            self.keys = [key for key in keys if key.key_type not in _SYMMETRIC and key.public_key_use in (None, "sig")]

    async def _load(self) -> dict[str, Any]:
        if self.file is not None:
            return json.loads(await anyio.Path(self.file).read_text(encoding="utf-8"))
        assert self.url is not None
        async with httpx2.AsyncClient(timeout=10, follow_redirects=True) as http:
            response = await http.get(self.url)
            response.raise_for_status()
            return response.json()


def _scopes(claims: dict[str, Any]) -> list[str]:
    """`scope` (RFC 9068, space-separated) or `scp` (a list, as some issuers send it)."""
    raw = claims.get("scope", claims.get("scp", ""))
    if isinstance(raw, str):
        return raw.split()
    return [str(s) for s in raw] if isinstance(raw, list) else []


class JwtVerifier:
    """`TokenVerifier` for JWTs from `settings.issuer` for `settings.audience`."""

    def __init__(self, settings: ResourceAuth, keys: KeySet) -> None:
        self.settings = settings
        self.keys = keys

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        key = await self.keys.key_for(header.get("kid"))
        if key is None or header.get("alg") != key.algorithm_name:
            return None
        try:
            claims = jwt.decode(
                token, key.key, algorithms=[key.algorithm_name], audience=self.settings.audience,
                issuer=self.settings.issuer, leeway=LEEWAY, options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            logger.debug("auth: refused a token (%s)", type(exc).__name__)
            return None
        return _access_token(token, claims)


def _access_token(token: str, claims: dict[str, Any]) -> AccessToken:
    subject = claims.get("sub")
    expires = claims.get("exp")
    return AccessToken(
        token=token, client_id=str(claims.get("client_id") or claims.get("azp") or subject or ""),
        scopes=_scopes(claims), expires_at=int(expires) if isinstance(expires, int | float) else None,
        subject=subject, claims=claims,
    )


class IntrospectionVerifier:
    """`TokenVerifier` that asks the issuer's introspection endpoint, caching active answers briefly.

    The answer must say `active`, name `settings.audience` in `aud`, and carry no other `iss`.
    """

    def __init__(self, settings: ResourceAuth) -> None:
        assert settings.introspection is not None
        self.settings = settings
        self.endpoint = settings.introspection
        self._cache: OrderedDict[str, tuple[float, AccessToken]] = OrderedDict()

    async def verify_token(self, token: str) -> AccessToken | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > time.time():
            return cached[1]
        claims = await self._introspect(token)
        if claims is None or not self._acceptable(claims):
            return None
        access = _access_token(token, claims)
        until = time.time() + INTROSPECTION_CACHE_SECONDS
        self._cache[key] = (min(until, access.expires_at or until), access)
        while len(self._cache) > INTROSPECTION_CACHE_SIZE:
            self._cache.popitem(last=False)
        return access

    async def _introspect(self, token: str) -> dict[str, Any] | None:
        try:
            async with httpx2.AsyncClient(timeout=10) as http:
                response = await http.post(self.endpoint.url, data={"token": token, "token_type_hint": "access_token"},
                                           auth=(self.endpoint.client_id, self.endpoint.client_secret))
            response.raise_for_status()
            claims = response.json()
        except (httpx2.HTTPError, ValueError) as exc:
            logger.warning("auth: token introspection at %s failed: %s", self.endpoint.url, type(exc).__name__)
            return None
        return claims if isinstance(claims, dict) else None

    def _acceptable(self, claims: dict[str, Any]) -> bool:
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        expires = claims.get("exp")
        return (
            claims.get("active") is True
            and self.settings.audience in audiences
            and claims.get("iss", self.settings.issuer) == self.settings.issuer
            and (not isinstance(expires, int | float) or expires + LEEWAY > time.time())
        )
