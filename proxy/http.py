"""Streamable HTTP transport: `/mcp`, `/mcp/<profile>` and `/healthz`.

Every request passes the Host/Origin check (DNS-rebinding protection) and, when a token is set,
the bearer check, before it reaches the SDK's session manager.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from proxy.server import PROFILE_SCOPE_KEY, ToolbridgeServer

logger = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def default_allowed_hosts(bind_host: str, extra: Iterable[str] = ()) -> list[str]:
    """Loopback names (any port), the bind address when it is a specific one, and `extra`."""
    hosts = [f"{h}:*" for h in LOOPBACK_HOSTS] + list(LOOPBACK_HOSTS)
    if bind_host not in ("0.0.0.0", "::", *LOOPBACK_HOSTS):
        hosts += [bind_host, f"{bind_host}:*"]
    for host in extra:
        hosts += [host] if ":" in host else [host, f"{host}:*"]
    return hosts


def _matches(value: str, allowed: Iterable[str]) -> bool:
    return any(value == p or (p.endswith(":*") and value.startswith(p[:-1])) for p in allowed)


def check_host_and_origin(headers: Headers, allowed_hosts: list[str], allowed_origins: list[str]) -> int | None:
    """The HTTP status to refuse with (421 bad Host, 403 bad Origin), or None when acceptable."""
    if not _matches(headers.get("host", ""), allowed_hosts):
        return 421
    origin = headers.get("origin")
    if origin and not _matches(origin, allowed_origins):
        return 403
    return None


def check_bearer(headers: Headers, token: str | None) -> bool:
    """Constant-time comparison of the `Authorization: Bearer` token, when one is configured."""
    if not token:
        return True
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())


class GatewayApp:
    """The ASGI app: routing, the security checks, and the SDK session manager behind them."""

    def __init__(
        self,
        toolbridge: ToolbridgeServer,
        *,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        auth_token: str | None,
        health: Callable[[], dict[str, Any]],
    ) -> None:
        self.toolbridge = toolbridge
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins
        self.auth_token = auth_token
        self.health = health
        self.sessions = StreamableHTTPSessionManager(
            toolbridge.server,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = Headers(scope=scope)
        refused = check_host_and_origin(headers, self.allowed_hosts, self.allowed_origins)
        if refused is not None:
            await Response("Host or Origin not allowed", status_code=refused)(scope, receive, send)
            return
        path = scope["path"].rstrip("/") or "/"
        if path == "/healthz":
            await JSONResponse(self.health())(scope, receive, send)
            return
        if not check_bearer(headers, self.auth_token):
            response = Response("Unauthorized", status_code=401, headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        profile = self._profile_from_path(path)
        if profile is None:
            await Response("Not Found", status_code=404)(scope, receive, send)
            return
        scope = {**scope, PROFILE_SCOPE_KEY: profile or None}
        await self.sessions.handle_request(scope, receive, send)

    def _profile_from_path(self, path: str) -> str | None:
        """'' for plain `/mcp`, the profile for `/mcp/<profile>`, None when not served here."""
        if path == "/mcp":
            return ""
        prefix, _, profile = path.partition("/mcp/")
        if prefix or "/" in profile or not self.toolbridge.catalog.has_profile(profile):
            return None
        return profile

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Run the session manager (and the change watcher) for the app's lifetime."""
        message = await receive()
        assert message["type"] == "lifespan.startup"
        async with self.sessions.run():
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
        await send({"type": "lifespan.shutdown.complete"})



async def serve_app(
    app: GatewayApp, host: str, port: int, *, on_start: Callable[[Callable[[], None]], None]
) -> None:
    """Serve with uvicorn until stopped; `on_start` receives the function that stops it gracefully."""
    import uvicorn

    class Server(uvicorn.Server):
        def capture_signals(self) -> Any:  # the caller owns signal handling
            return nullcontext()

    server = Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                                   timeout_graceful_shutdown=5))

    def stop() -> None:
        server.should_exit = True

    on_start(stop)
    await server.serve()
