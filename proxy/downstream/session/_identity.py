"""Who a request acts for, from its credentials alone: the one answer every binding is keyed on.

A request's *principal* is what the transport authenticated: an OAuth token's subject at its issuer
(`principal_of`), else everyone who reaches an HTTP endpoint without per-user tokens alike
(`anonymous`), else the one client of a stdio or in-memory connection (`local`). Its *session* is one
the transport validated: a handshake-era `Mcp-Session-Id` (the SDK routes such a request only into
the session it names, and with OAuth only for the credential that opened it), or the connection. A
2026-era HTTP request has no session whatever it carries: the SDK routes it without looking at
`Mcp-Session-Id`. Nothing a client says — a header, `_meta`, its name, a body — picks either.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable
from dataclasses import dataclass

from mcp.server.auth.provider import principal_components
from starlette.datastructures import Headers
from starlette.types import Scope

from proxy.downstream.session._context import RequestContext, handshake_era
from proxy.downstream.session._observe import session_label

__all__ = ["ANONYMOUS_PRINCIPAL", "LOCAL_PRINCIPAL", "Caller", "Owner", "caller", "client_name", "in_profile",
           "principal_of", "promotion_key"]

LOCAL_PRINCIPAL = "local"  # stdio or in memory: the one client that started this process
ANONYMOUS_PRINCIPAL = "anonymous"  # HTTP without per-user tokens: whoever reaches the endpoint


@dataclass(frozen=True)
class Owner:
    """A binding's owner as a key: what a sessionless (2026-era) request's pins are kept under."""

    label: str


@dataclass(frozen=True)
class Caller:
    """A request's principal and, where the transport validated one, its session."""

    principal: str
    session: Hashable | None

    @property
    def personal(self) -> bool:
        """Whether the principal is one user: only an OAuth token names one; `anonymous` is everyone."""
        return self.principal not in (LOCAL_PRINCIPAL, ANONYMOUS_PRINCIPAL)

    @property
    def owner(self) -> str:
        """Whose task ids and pins these are: the user's where credentials name one, else the session's.

        A 2026-era HTTP request on an endpoint without per-user tokens has neither: it is the
        endpoint's one anonymous principal, like every other such request.
        """
        if self.personal:
            return self.principal
        return json.dumps([self.principal, session_label(self.session)])


def in_profile(owner: str, profile: str) -> str:
    """What a request leaves behind (a task, a round's state, a large result) is bound to: its owner in the profile
    it was made in, so the same user in a narrower profile cannot reach what that profile does not show."""
    return json.dumps([owner, profile])


def principal_of(scope: Scope) -> str:
    """Who opens a session: the OAuth token's subject at its issuer (else its client), a hash of a
    bearer token, or the client address."""
    token = getattr(scope.get("user"), "access_token", None)
    if token is not None:
        client_id, issuer, subject = principal_components(token)
        return "oauth:" + json.dumps([issuer, subject] if subject else [issuer, None, client_id])
    scheme, _, presented = Headers(scope=scope).get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and presented.strip():
        return "token:" + hashlib.sha256(presented.strip().encode()).hexdigest()[:16]
    client = scope.get("client")
    return f"address:{client[0] if client else '-'}"


def caller(ctx: RequestContext) -> Caller:
    """Who `ctx` acts for (see the module docstring)."""
    if ctx.request is None:
        return Caller(LOCAL_PRINCIPAL, ctx.lifespan_context)  # `Server.run()` yields a `ConnectionId`
    session = ctx.request.headers.get("mcp-session-id") if handshake_era(ctx) else None
    if getattr(ctx.request.scope.get("user"), "access_token", None) is None:
        return Caller(ANONYMOUS_PRINCIPAL, session)
    return Caller(principal_of(ctx.request.scope), session)


def promotion_key(ctx: RequestContext) -> Hashable | None:
    """Whose promotions a request sees: a handshake-era session's own (it promotes what it uses), else
    its owner's (a 2026-era list depends only on profile and principal, SEP-2567)."""
    found = caller(ctx)
    return found.session if handshake_era(ctx) else Owner(found.owner)


def client_name(ctx: RequestContext) -> str | None:
    """The name the client gave itself: it picks a `match` profile, never an owner."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None and params.client_info is not None else None
