"""`/ui`: the operator's console, an ASGI app behind the HTTP endpoint's own authentication (`HttpApp`
routes here only after the bearer or OAuth check; the sign-in form alone is reachable before it).

Every response carries a strict Content-Security-Policy (scripts and styles from this origin only, no
inline script, no framing), and the one state-changing action, Approve, needs a CSRF token bound to the
request's credential, on top of the endpoint's Origin check and the cookie's SameSite=Strict.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

from proxy.console._pages import (
    AUDIT_FILTERS,
    audit_page,
    fleet_page,
    fleet_rows,
    profiles_page,
    search_page,
    server_page,
    sign_in_page,
)
from proxy.downstream import CONSOLE_COOKIE, CONSOLE_PATH, CONSOLE_SIGN_IN, bridge
from proxy.errors import ToolbridgeError
from proxy.ops import Metrics, catalog_report, latest_records
from proxy.views import Views

if TYPE_CHECKING:
    from proxy.upstream import FingerprintStore

__all__ = ["Console", "ConsoleSources"]

logger = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
STATIC_TYPES = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
           "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}
MAX_FORM_BYTES = 64 << 10
AUDIT_SHOWN = 200
SEARCH_LIMIT = 20
HTML = "text/html; charset=utf-8"


@dataclass(frozen=True)
class ConsoleSources:
    """What the console reads, the same objects `/status`, `/metrics` and the CLI read."""

    status: Callable[[], dict[str, Any]]  # the `/status` report, redacted and escaped
    views: Views
    metrics: Metrics
    store: FingerprintStore  # the approved and pending tool fingerprints (`toolbridge approve` writes it too)
    audit: Path | None  # the audit log, when it is on


class Console:
    """The console's routes; `HttpApp` hands it every `/ui` request."""

    def __init__(self, sources: ConsoleSources) -> None:
        self.sources = sources
        self._csrf_key = secrets.token_bytes(32)  # per process: a restart ends every open form

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await self._answer(request, (scope["path"].rstrip("/") or "/").removeprefix(CONSOLE_PATH))
        response.headers.update(HEADERS)
        await response(scope, receive, send)

    async def _answer(self, request: Request, path: str) -> Response:
        if path == CONSOLE_SIGN_IN.removeprefix(CONSOLE_PATH):
            return await self._sign_in(request)
        if request.method == "POST" and path.startswith("/servers/") and path.endswith("/approve"):
            return await self._approve(request, path.removeprefix("/servers/").removesuffix("/approve"))
        if request.method != "GET":
            return Response("Method Not Allowed", 405)
        if path.startswith("/static/") and path.removeprefix("/static/") in STATIC_TYPES:
            name = path.removeprefix("/static/")
            return Response((STATIC / name).read_bytes(), media_type=STATIC_TYPES[name])
        if path.startswith("/servers/"):
            return self._server(request, path.removeprefix("/servers/"))
        pages: dict[str, Callable[[Request], Any]] = {
            "": self._fleet, "/fleet.json": self._fleet_json, "/profiles": self._profiles, "/search": self._search,
            "/audit": self._audit,
        }
        if path not in pages:
            return Response("Not Found", 404)
        return await pages[path](request)

    def _csrf(self, request: Request) -> str:
        """The Approve forms' token: bound to the credential the request came with, unknowable off this page."""
        credential = request.headers.get("authorization", "").encode()
        return hmac.new(self._csrf_key, credential, hashlib.sha256).hexdigest()

    async def _fleet(self, _request: Request) -> Response:
        return Response(fleet_page(self.sources.status(), self.sources.metrics.by_server()), media_type=HTML)

    async def _fleet_json(self, _request: Request) -> Response:
        rows = fleet_rows(self.sources.status(), self.sources.metrics.by_server())
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        return JSONResponse({"rows": rows, "updated": now})

    def _server(self, request: Request, name: str) -> Response:
        report = self.sources.status()
        upstream = next((u for u in report["upstreams"] if u["server"] == name), None)
        tools = sorted((e for e in self.sources.views.registry.tools.values() if e.server == name),
                       key=lambda e: e.name)
        definitions = [{**e.tool.model_dump(by_alias=True, exclude_none=True, mode="json"), "raw_name": e.raw_name}
                       for e in tools]
        prints = self.sources.store.load().get(name)
        changes = [c for c in report["tool_changes"] if c["server"] == name]
        html = server_page(name, upstream, definitions, prints.approved if prints else {}, changes, self._csrf(request))
        return Response(html, status_code=200 if upstream else 404, media_type=HTML)

    async def _approve(self, request: Request, name: str) -> Response:
        """What `toolbridge approve` does: trust the pending definitions (the named tools, else all); the
        running gateway sees the store change and registers them."""
        form = await _form(request)
        if form is None or not hmac.compare_digest(form.get("csrf", [""])[0], self._csrf(request)):
            return Response("Forbidden: the form's CSRF token is missing or stale; reload the page", 403)
        try:
            approved = await anyio.to_thread.run_sync(self.sources.store.approve, name, form.get("tool", []))
        except KeyError as exc:
            return Response(f"No change awaits approval for {name}: {exc.args[0]}", 409)
        logger.info("console: approved %d tool definition(s) of %s: %s", len(approved), name, ", ".join(approved))
        return RedirectResponse(f"{CONSOLE_PATH}/servers/{quote(name, safe='')}", 303)

    async def _profiles(self, _request: Request) -> Response:
        views = self.sources.views
        reports = [catalog_report(views, name) for name in sorted(views.toolsets.profiles)]
        return Response(profiles_page(reports), media_type=HTML)

    async def _search(self, request: Request) -> Response:
        views = self.sources.views
        profiles = sorted(views.toolsets.profiles)
        profile = request.query_params.get("profile") or "default"
        query = request.query_params.get("q", "").strip()
        if profile not in profiles or not query:
            return Response(search_page(profiles, profile, query, None), media_type=HTML)
        view = views.for_profile(profile)
        try:
            await bridge.prepare_search(views, view, {"queries": [query]})
            answer = bridge.explain(views, view, query, SEARCH_LIMIT)
        except ToolbridgeError as exc:
            return Response(f"Bad request: {exc}", 400)
        return Response(search_page(profiles, profile, query, answer), media_type=HTML)

    async def _audit(self, request: Request) -> Response:
        filters = {f: request.query_params.get(f, "") for f in AUDIT_FILTERS}
        path = self.sources.audit
        records = [] if path is None else await anyio.to_thread.run_sync(
            lambda: latest_records(path, AUDIT_SHOWN, **filters))
        return Response(audit_page(records, filters, enabled=path is not None), media_type=HTML)

    async def _sign_in(self, request: Request) -> Response:
        """The form that keeps a credential in a cookie for `/ui` (checked there as the header would be)."""
        if request.method != "POST":
            return Response(sign_in_page(), media_type=HTML)
        form = await _form(request)
        token = (form or {}).get("token", [""])[0].strip()
        response = RedirectResponse(CONSOLE_PATH, 303)
        response.set_cookie(CONSOLE_COOKIE, quote(token, safe=""), path=CONSOLE_PATH, httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")
        return response


async def _form(request: Request) -> dict[str, list[str]] | None:
    """A urlencoded form body of at most `MAX_FORM_BYTES`; None for anything else."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    return parse_qs(body.decode("utf-8", "replace"))
