"""An MCP upstream that requires OAuth 2.1, with its own authorization server, for the auth tests.

Built from the SDK's server-side auth: `OAuthAuthorizationServerProvider` (implemented here, in
memory), its routes (metadata, dynamic client registration, authorize, token, revoke), the bearer
middleware and protected-resource metadata. `authorize` sends the browser to a consent page of
ours; `consent()` is what a person clicking "Allow" would do, over HTTP.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    ProviderTokenVerifier,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken, ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from servers.controllable import build_server

SCOPE = "tools"


@dataclass
class AuthServer:
    """In-memory `OAuthAuthorizationServerProvider`; the counters let tests see what happened."""

    base: str
    access_ttl: int = 3600
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    pending: dict[str, tuple[str, AuthorizationParams]] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    consents: int = 0
    refreshes: int = 0
    time_left_at_refresh: list[float] = field(default_factory=list)  # of the access token being replaced
    _access_of: dict[str, str] = field(default_factory=dict)  # refresh token -> its access token
    discoveries: int = 0  # protected-resource metadata fetches: one per attempt to authorize
    issued: list[str] = field(default_factory=list)  # every token string ever handed out
    # Client ID Metadata Documents, by URL: what this server would fetch from there. With any, the
    # metadata says `client_id_metadata_document_supported`.
    documents: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    iss: str | None = None  # the `iss` of its authorization responses (RFC 9207); none by default
    # The token endpoint authentication methods its metadata lists, where not the SDK's (an empty list: none listed).
    token_auth_methods: list[str] | None = None
    # A scope `tools/call` needs besides `SCOPE`: a call without it is refused 403 `insufficient_scope`.
    step_up: str | None = None

    presented: list[str] = field(default_factory=list)  # every client id and refresh token it was shown

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        self.presented.append(client_id)
        return self.clients.get(client_id) or self.documents.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        if self.step_up is not None:  # any client may later ask for the wider scope too
            client_info = client_info.model_copy(update={"scope": f"{SCOPE} {self.step_up}"})
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        request = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.pending[request] = (client.client_id, params)
        return f"{self.base}/consent?request={request}"

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        found = self.codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self._issue(authorization_code.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        self.presented.append(refresh_token)
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refreshes += 1
        replaced = self.access.get(self._access_of.get(refresh_token.token, ""))
        if replaced is not None and replaced.expires_at is not None:
            self.time_left_at_refresh.append(replaced.expires_at - time.time())
        del self.refresh[refresh_token.token]  # rotated
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.revoke_everything()

    def revoke_everything(self) -> None:
        """Forget every access and refresh token (what an admin's "revoke access" does)."""
        self.access.clear()
        self.refresh.clear()

    def expire_access_tokens(self) -> None:
        """Every access token in use is now past its expiry (the refresh tokens still work)."""
        for token, info in self.access.items():
            self.access[token] = info.model_copy(update={"expires_at": int(time.time()) - 1})

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = f"AT-{secrets.token_hex(12)}", f"RT-{secrets.token_hex(12)}"
        self.issued += [access, refresh]
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + self.access_ttl, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        self._access_of[refresh] = access
        return OAuthToken(access_token=access, expires_in=self.access_ttl, scope=" ".join(scopes),
                          refresh_token=refresh)

    # --- the consent page ------------------------------------------------------------------------

    async def consent_page(self, request: Request) -> Response:
        if request.method == "GET":
            ref = request.query_params.get("request", "")
            form = (f'<form method="post"><input type="hidden" name="request" value="{ref}">'
                    '<button name="decision" value="allow">Allow</button></form>')
            return HTMLResponse(form)
        form = await request.form()
        client_id, params = self.pending.pop(str(form["request"]))
        if form.get("decision") != "allow":
            return RedirectResponse(construct_redirect_uri(str(params.redirect_uri), error="access_denied",
                                                           state=params.state), status_code=302)
        self.consents += 1
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [SCOPE], expires_at=time.time() + 300, client_id=client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource,
        )
        return RedirectResponse(construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state,
                                                       iss=self.iss), status_code=302)

    def metadata(self, settings: AuthSettings) -> Route:
        """Its authorization server metadata, saying whether it takes Client ID Metadata Documents."""
        assert settings.client_registration_options and settings.revocation_options

        async def serve(request: Request) -> Response:
            metadata = build_metadata(settings.issuer_url, None, settings.client_registration_options,
                                      settings.revocation_options)
            metadata.client_id_metadata_document_supported = bool(self.documents) or None
            if self.token_auth_methods is not None:
                metadata.token_endpoint_auth_methods_supported = self.token_auth_methods or None
            return JSONResponse(metadata.model_dump(mode="json", exclude_none=True))

        return Route("/.well-known/oauth-authorization-server", serve)


def oauth_app(auth: AuthServer, state: Any = None) -> Any:
    """The controllable server at `/mcp`, reachable only with a token `auth` issued for it."""
    settings = _settings(auth.base, f"{auth.base}/mcp", auth.step_up)
    app = build_server(state).streamable_http_app(
        auth=settings, token_verifier=ProviderTokenVerifier(auth), auth_server_provider=auth,
        custom_starlette_routes=[Route("/consent", auth.consent_page, methods=["GET", "POST"])],
    )
    app.router.routes.insert(0, auth.metadata(settings))  # ahead of the SDK's own

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/.well-known/oauth-protected-resource"):
            auth.discoveries += 1
        if auth.step_up is not None and scope["type"] == "http" and scope["method"] == "POST":
            receive = await _refused_without(auth, auth.step_up, scope, receive, send)
            if receive is None:
                return
        await app(scope, receive, send)

    return counting


async def _refused_without(auth: AuthServer, needed: str, scope: Any, receive: Any, send: Any) -> Any:
    """A `tools/call` whose token lacks `needed` is answered 403 `insufficient_scope` (None); any other request
    goes on, its body replayed (the returned `receive`)."""
    messages = [await receive()]
    while messages[-1].get("more_body"):
        messages.append(await receive())
    body = b"".join(message.get("body", b"") for message in messages)
    token = dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Bearer ")
    granted = auth.access[token].scopes if token in auth.access else [needed]  # no token: the SDK's 401
    if b'"tools/call"' in body and needed not in granted:
        challenge = f'Bearer error="insufficient_scope", scope="{SCOPE} {needed}"'
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"www-authenticate", challenge.encode()), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return None

    async def replay() -> Any:
        return messages.pop(0) if messages else await receive()

    return replay


def _settings(issuer: str, resource: str | None, step_up: str | None = None) -> AuthSettings:
    scopes = [SCOPE, step_up] if step_up else [SCOPE]
    return AuthSettings(
        issuer_url=AnyHttpUrl(issuer),
        resource_server_url=AnyHttpUrl(resource) if resource else None,
        validate_token_resource=resource is not None,
        required_scopes=[SCOPE],
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=scopes,
                                                              default_scopes=scopes),
        revocation_options=RevocationOptions(enabled=True),
    )


def authorization_app(auth: AuthServer) -> Starlette:
    """`auth` alone, an authorization server on its own origin (for `MovingResource`)."""
    settings = _settings(auth.base, None)
    assert settings.client_registration_options and settings.revocation_options
    routes = create_auth_routes(auth, settings.issuer_url, None, settings.client_registration_options,
                                settings.revocation_options)
    return Starlette(routes=[auth.metadata(settings), *routes,
                             Route("/consent", auth.consent_page, methods=["GET", "POST"])])


@dataclass
class MovingResource:
    """The controllable server at `<base>/mcp`, trusting whichever authorization server `auth` is now
    (an upstream that moves to another issuer): its protected-resource metadata names it, and only
    its tokens are accepted."""

    base: str
    auth: AuthServer

    def app(self, state: Any = None) -> Any:
        resource = f"{self.base}/mcp"
        app = build_server(state).streamable_http_app(auth=_settings(self.auth.base, resource), token_verifier=self)

        async def metadata(request: Request) -> Response:
            described = ProtectedResourceMetadata(resource=AnyHttpUrl(resource), scopes_supported=[SCOPE],
                                                  authorization_servers=[AnyHttpUrl(self.auth.base)])
            return JSONResponse(described.model_dump(mode="json", exclude_none=True))

        app.router.routes.insert(0, Route("/.well-known/oauth-protected-resource/mcp", metadata))
        return app

    async def verify_token(self, token: str) -> AccessToken | None:
        return await ProviderTokenVerifier(self.auth).verify_token(token)


async def consent(authorization_url: str, decision: str = "allow") -> None:
    """Be the user's browser: open the URL, click Allow, follow the redirect to the loopback callback."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as browser:
        page = await browser.get(authorization_url)
        assert page.status_code == 302, page.text
        consent_url = page.headers["location"]
        ref = parse_qs(urlparse(consent_url).query)["request"][0]
        await browser.get(consent_url)
        allowed = await browser.post(consent_url.split("?")[0], data={"request": ref, "decision": decision})
        assert allowed.status_code == 302, allowed.text
        callback = await browser.get(allowed.headers["location"])
        assert callback.status_code == 200, callback.text
