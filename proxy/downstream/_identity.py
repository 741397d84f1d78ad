"""Who a request comes from: its session, or for a sessionless 2026-era HTTP request, its client."""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass

from proxy.downstream._admission import principal_of
from proxy.downstream._channels import RequestContext

__all__ = ["SessionlessClient", "client_name", "principal", "promotion_key", "session_key"]

LOCAL_PRINCIPAL = "local"  # stdio or in memory: the one client that started this process
ANONYMOUS_PRINCIPAL = "anonymous"  # HTTP without per-user tokens: whoever reaches the endpoint


def session_key(ctx: RequestContext) -> Hashable | None:
    """A public handle on the session: its `Mcp-Session-Id` over HTTP, its connection otherwise
    (`Server.run()` enters the lifespan once per stdio or in-memory connection: it yields a `ConnectionId`)."""
    if ctx.request is not None:
        return ctx.request.headers.get("mcp-session-id")
    return ctx.lifespan_context


@dataclass(frozen=True)
class SessionlessClient:
    """A 2026-era HTTP client, known by what it says it is: its token's subject and its name."""

    subject: str | None
    name: str | None

    @property
    def label(self) -> str:
        return json.dumps([self.subject, self.name])


def promotion_key(ctx: RequestContext) -> Hashable | None:
    """Whose promotions a request sees: its session's, or its client's for a 2026-era HTTP request.

    Such a request has no session, so what a client used is kept under what it says it is: the
    subject of its token when the endpoint checks OAuth tokens, and its client name. On an endpoint
    without per-user tokens, every client of one name is taken to be the same user's.
    """
    key = session_key(ctx)
    if key is not None or ctx.request is None:
        return key
    token = getattr(ctx.request.scope.get("user"), "access_token", None)
    return SessionlessClient((token.subject or token.client_id) if token is not None else None, client_name(ctx))


def principal(ctx: RequestContext) -> str:
    """Who a request acts for, whatever its session: its OAuth token's subject at its issuer (or the
    client it was issued to; as sessions are counted, `principal_of`), else everyone reaching an HTTP
    endpoint without per-user tokens alike, else the local client."""
    if ctx.request is None:
        return LOCAL_PRINCIPAL
    if getattr(ctx.request.scope.get("user"), "access_token", None) is None:
        return ANONYMOUS_PRINCIPAL
    return principal_of(ctx.request.scope)


def client_name(ctx: RequestContext) -> str | None:
    params = ctx.session.client_params
    return params.client_info.name if params is not None and params.client_info is not None else None
