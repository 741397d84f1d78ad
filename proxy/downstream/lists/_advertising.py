"""What a session is told about the protocol toolbridge carries for it: the extensions of the servers in
its scope (on `initialize` and `server/discover`), and the cache hints of its merged lists.

Both come from the session's `CatalogView` (merged there from each server's `ServerTraits`). A list
that may differ by who asks is `private` whatever its servers said: a profile chosen by a token's
claim, or tools promoted for one session or principal. A public entry never differs by user.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult

from proxy.downstream.http import ALLOWED_PROFILES_SCOPE_KEY
from proxy.downstream.session import RequestContext
from proxy.protocol import CacheHint, ListKind
from proxy.views import SessionView

__all__ = ["ExtensionsAdvertiser", "list_hint"]

_ANNOUNCING = ("initialize", "server/discover")


def _by_principal(ctx: RequestContext, view: SessionView, kind: ListKind) -> bool:
    by_claim = ctx.request is not None and ctx.request.scope.get(ALLOWED_PROFILES_SCOPE_KEY) is not None
    return by_claim or (kind == "tools" and view.promote > 0)


def list_hint(ctx: RequestContext, view: SessionView, kind: ListKind) -> dict[str, Any]:
    """A merged list's `ttl_ms` and `cache_scope`: the smallest upstream TTL, private when any input is
    or when the list is chosen per principal."""
    hint = view.catalog.hint(kind)
    if _by_principal(ctx, view, kind):
        hint = hint.merge(CacheHint(hint.ttl_ms, private=True))
    return hint.fields


def _client_name(ctx: RequestContext) -> str | None:
    """The name `initialize` carries: the session has not taken it in yet when the answer is made."""
    info = ctx.params.get("clientInfo") if isinstance(ctx.params, Mapping) else None
    name = info.get("name") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else None


class ExtensionsAdvertiser:
    """Server middleware adding the session's carried extensions to `capabilities.extensions`.

    On the answer's wire form, so the handshake era gets them too: its schema has no such field and
    the SDK would drop it, but hosts read it there (MCP Apps' capability negotiation predates 2026).
    """

    def __init__(self, view_of: Callable[[RequestContext, str | None], SessionView]) -> None:
        self.view_of = view_of

    async def __call__(self, ctx: RequestContext, call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method not in _ANNOUNCING or not isinstance(result, dict):
            return result
        capabilities = result.get("capabilities")
        extensions = self.view_of(ctx, _client_name(ctx)).catalog.extensions
        if not extensions or not isinstance(capabilities, dict):
            return result
        own = capabilities.get("extensions") if isinstance(capabilities.get("extensions"), dict) else {}
        return {**result, "capabilities": {**capabilities, "extensions": {**extensions, **own}}}
