"""Streamable HTTP transport: `/mcp`, `/mcp/<profile>`, `/healthz`, and the operator's `/status`, `/metrics`, `/ui`.

Every request passes the SDK's Host/Origin check (DNS-rebinding protection, configured here and
applied first, so even `/healthz` answers only to allowed hosts) and then either the static
bearer check (all but `/healthz`, when a token is set) or, with `auth:` in `toolsets.yaml`, the
OAuth protected resource (`http/_protected_resource.py`), before it reaches the SDK's session manager.
The operator's console (`/ui`) passes the same checks; a browser, which cannot add a header, may carry
the same credential in a cookie its sign-in form set (`CONSOLE_COOKIE`), checked as if it were the header.
`/healthz` is a readiness probe: 503 until the fleet settled and again once the drain began, 200
in between. Behind a load balancer each replica marks its session ids (`http/_replica.py`). New
handshake-era sessions are admitted under caps per principal and in all (`http/_admission.py`).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Hashable, Iterable
from contextlib import nullcontext
from typing import Any
from urllib.parse import unquote

import anyio
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import DEFAULT_SESSION_IDLE_TIMEOUT, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import Request, cookie_parser
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.downstream.http._admission import SessionAdmission, StatusWatch
from proxy.downstream.http._drain import StreamDrain
from proxy.downstream.http._protected_resource import ALLOWED_PROFILES_SCOPE_KEY, ProtectedResource
from proxy.downstream.http._replica import ReplicaMarker

logger = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
# Within Kubernetes' default 30 s termination grace period, with room for the process to exit.
DRAIN_SECONDS = 25
MAX_SESSIONS = 10_000  # the SDK's own limit, which refuses rather than evicts
MAX_SESSIONS_PER_PRINCIPAL = 1_000
PROFILE_SCOPE_KEY = "toolbridge.profile"  # the profile a request is served in, for the handlers
CONSOLE_PATH = "/ui"
CONSOLE_SIGN_IN = "/ui/login"  # the form that takes the credential: it shows nothing else
CONSOLE_COOKIE = "toolbridge_console"  # the credential a browser signed in with (HttpOnly, SameSite=Strict)
_CONSOLE_REFUSAL = ('<!doctype html><title>toolbridge: unauthorized</title><p>Unauthorized. '
                    '<a href="/ui/login">Sign in</a> with the endpoint\'s bearer token.</p>')
_CONSOLE_REFUSAL_HEADERS = {"Content-Security-Policy": "default-src 'none'", "X-Content-Type-Options": "nosniff",
                            "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}


def transport_security(
    bind_host: str, extra_hosts: Iterable[str] = (), extra_origins: Iterable[str] = ()
) -> TransportSecuritySettings:
    """Loopback names (any port), the bind address when it is a specific one, and the extras.

    Origins are the same hosts over http and https, plus `extra_origins`.
    """
    hosts = [f"{h}:*" for h in LOOPBACK_HOSTS] + list(LOOPBACK_HOSTS)
    if bind_host not in ("0.0.0.0", "::", *LOOPBACK_HOSTS):
        hosts += [bind_host, f"{bind_host}:*"]
    for host in extra_hosts:
        hosts += [host] if ":" in host else [host, f"{host}:*"]
    origins = [f"{scheme}://{h}" for scheme in ("http", "https") for h in hosts] + list(extra_origins)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


def in_console(path: str) -> bool:
    return path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/")


def cookie_as_bearer(scope: Scope) -> Scope:
    """A console request without `Authorization`, with the header its sign-in cookie holds: the credential
    then meets exactly the checks a header would."""
    headers = Headers(scope=scope)
    credential = unquote(cookie_parser(headers.get("cookie", "")).get(CONSOLE_COOKIE, ""))
    if "authorization" in headers or not credential or not credential.isascii() or not credential.isprintable():
        return scope
    return {**scope, "headers": [*scope["headers"], (b"authorization", f"Bearer {credential}".encode())]}


def check_bearer(headers: Headers, token: str | None) -> bool:
    """Constant-time comparison of the `Authorization: Bearer` token, when one is configured."""
    if not token:
        return True
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())


def _needs_token(presented: bool) -> Response:
    """A 401 that says what to send: a static token has no authorization server to discover (RFC 6750 §3: no
    `error` when no credentials came). Clients that show the body (or `error_description`) tell the user."""
    challenge = 'Bearer realm="toolbridge"'
    if presented:
        challenge += ', error="invalid_token", error_description="not the token this endpoint was started with"'
    why = "the bearer token is not this endpoint's" if presented else "no bearer token was sent"
    return Response(f"toolbridge: {why}. Send the header `Authorization: Bearer <token>` with the token `serve` was "
                    "given (--auth-token or TOOLBRIDGE_AUTH_TOKEN); this endpoint has no OAuth login.\n",
                    status_code=401, headers={"WWW-Authenticate": challenge}, media_type="text/plain")


class HttpApp:
    """The ASGI app: routing, the security checks, and the SDK session manager behind them."""

    def __init__(
        self,
        server: Server[Any],
        *,
        security: TransportSecuritySettings,
        auth_token: str | None,
        has_profile: Callable[[str], bool],
        health: Callable[[], dict[str, Any]],
        resource: ProtectedResource | None = None,
        status: Callable[[], dict[str, Any]] | None = None,
        metrics: Callable[[], bytes] | None = None,
        replica: ReplicaMarker | None = None,
        forget: Callable[[Hashable], None] | None = None,
        max_sessions: int = MAX_SESSIONS,
        max_sessions_per_principal: int = MAX_SESSIONS_PER_PRINCIPAL,
        profiles: Callable[[], Iterable[str]] | None = None,
        console: ASGIApp | None = None,
    ) -> None:
        self.guard = TransportSecurityMiddleware(security)
        self.auth_token = auth_token
        self.resource = resource
        self.protected = resource.protect(self._behind_auth) if resource is not None else self._behind_auth
        self.has_profile = has_profile
        self.profiles = profiles
        self.health = health
        self.status = status
        self.metrics = metrics
        self.replica = replica
        self.forget = forget
        self.console = console
        self.drain = StreamDrain()
        # No settings: `guard` has checked Host and Origin before any path is routed, and the transport
        # would check them again (it still checks a POST's Content-Type).
        self.sessions = StreamableHTTPSessionManager(server, max_sessions=None)
        self.admission = SessionAdmission(self.sessions.handle_request, max_sessions=max_sessions,
                                          max_per_principal=max_sessions_per_principal,
                                          idle_timeout=DEFAULT_SESSION_IDLE_TIMEOUT, forget=forget)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        refused = await self.guard.validate_request(Request(scope))
        if refused is not None:
            await refused(scope, receive, send)
            return
        path = scope["path"].rstrip("/") or "/"
        if path == "/healthz":
            await self._healthz(scope, receive, send)
            return
        if self.resource is not None and path in self.resource.metadata_paths:
            await self.resource.metadata_app(scope, receive, send)
            return
        console = self.console is not None and in_console(path)
        if console and path == CONSOLE_SIGN_IN:
            await self.console(scope, receive, send)  # type: ignore[misc]
            return
        if console:
            scope = cookie_as_bearer(scope)
        headers = Headers(scope=scope)
        if not check_bearer(headers, self.auth_token):
            refusal = _needs_token("authorization" in headers)
            if console:
                challenge = {"WWW-Authenticate": refusal.headers["www-authenticate"]}
                refusal = HTMLResponse(_CONSOLE_REFUSAL, 401, {**challenge, **_CONSOLE_REFUSAL_HEADERS})
            await refusal(scope, receive, send)
            return
        await self.protected(scope, receive, send)

    async def _behind_auth(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`/status`, `/metrics`, the console, and MCP in the path's profile, unless a token's claim allows
        others: then one of those (the first by default). An identity whose claim allows no profile is refused
        everywhere, the operator's pages included."""
        path = scope["path"].rstrip("/") or "/"
        allowed = scope.get(ALLOWED_PROFILES_SCOPE_KEY)
        if allowed is not None:
            allowed = tuple(p for p in allowed if self.has_profile(p))  # a reload may have removed one
        if allowed == () and path != "/mcp" and not path.startswith("/mcp/"):
            headers = _CONSOLE_REFUSAL_HEADERS if in_console(path) else None
            await Response("Forbidden: no profile for this identity", 403, headers)(scope, receive, send)
            return
        if path == "/status" and self.status is not None:
            await JSONResponse(self.status())(scope, receive, send)
            return
        if path == "/metrics" and self.metrics is not None:
            await Response(self.metrics(), media_type=PROMETHEUS_TEXT)(scope, receive, send)
            return
        if self.console is not None and in_console(path):
            await self.console(scope, receive, send)
            return
        profile = self._profile_from_path(path)
        if profile is None:
            await Response(self._not_found(path, allowed), status_code=404)(scope, receive, send)
            return
        if allowed is not None and (not allowed or (profile and profile not in allowed)):
            await Response("Forbidden: no such profile for this identity", status_code=403)(scope, receive, send)
            return
        scope = {**scope, PROFILE_SCOPE_KEY: profile or (allowed[0] if allowed else None)}
        await self.drain.serve(self._mcp, scope, receive, send)

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.replica is None:
            await self._session_request(scope, receive, send)
        else:
            await self.replica.serve(self._session_request, scope, receive, send)

    async def _session_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's session manager answers; a session its client ended (DELETE) is forgotten, so what the
        handlers keep for it (change notifications, log level, promotions, subscriptions) goes with it."""
        if scope["method"] != "DELETE" or self.forget is None:
            await self.admission(scope, receive, send)
            return
        watched = StatusWatch(send)
        await self.admission(scope, receive, watched)
        session = Headers(scope=scope).get("mcp-session-id")
        if session and 200 <= watched.status < 300:
            self.forget(session)

    async def _healthz(self, scope: Scope, receive: Receive, send: Send) -> None:
        health = self.health()
        if self.drain.draining:
            health = {**health, "status": "draining"}
        if self.replica is not None:
            health = {**health, "replica": self.replica.replica_id}
        await JSONResponse(health, status_code=200 if health["status"] == "ok" else 503)(scope, receive, send)

    def _not_found(self, path: str, allowed: tuple[str, ...] | None) -> str:
        """A mistyped `/mcp/<profile>` learns the paths that work (those its token may use)."""
        if not path.startswith("/mcp/") or self.profiles is None:
            return "Not Found"
        names = sorted(self.profiles()) if allowed is None else allowed
        return f"Not Found: no such profile. MCP is served at /mcp and at /mcp/<profile> for: {', '.join(names)}"

    def _profile_from_path(self, path: str) -> str | None:
        """'' for plain `/mcp`, the profile for `/mcp/<profile>`, None when not served here."""
        if path == "/mcp":
            return ""
        prefix, _, profile = path.partition("/mcp/")
        if prefix or "/" in profile or not self.has_profile(profile):
            return None
        return profile

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Run the session manager for the app's lifetime."""
        message = await receive()
        assert message["type"] == "lifespan.startup"
        async with self.sessions.run():
            await send({"type": "lifespan.startup.complete"})
            await receive()
        await send({"type": "lifespan.shutdown.complete"})


class _UvicornWithoutSignals(uvicorn.Server):
    """Uvicorn, minus its signal handlers: the app owns SIGTERM/SIGINT (graceful drain)."""

    def capture_signals(self) -> Any:
        return nullcontext()


async def serve_http(app: HttpApp, host: str, port: int, *, stop: anyio.Event) -> None:
    """Serve with uvicorn until `stop` is set, then drain: refuse new connections, end the notification
    streams, let the requests in flight finish (up to `DRAIN_SECONDS`), and return."""
    server = _UvicornWithoutSignals(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                                   lifespan="on", timeout_graceful_shutdown=DRAIN_SECONDS))

    async def stop_when_asked() -> None:
        await stop.wait()
        app.drain.start()
        server.should_exit = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_when_asked)
        await server.serve()
        tg.cancel_scope.cancel()
