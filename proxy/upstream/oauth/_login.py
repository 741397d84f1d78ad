"""The user's consent for an OAuth upstream: `toolbridge login <server>` from a terminal, or a
URL-mode elicitation to the session whose tool call needs it.

The loopback redirect listener starts first (so the browser never meets a closed port), then the
authorization URL is shown (printed, or sent to the calling client to open), and the SDK's flow
waits for the redirect to deliver the code and the state it checks. The listener answers one
well-formed `/callback` and nothing else.
"""

from __future__ import annotations

import html
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp import types
from mcp.client.auth import AuthorizationCodeResult

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamError, UpstreamNeedsAuth, UpstreamRefused
from proxy.protocol import BackChannel
from proxy.upstream.connection import connect
from proxy.upstream.oauth._provider import OpenUrl, oauth_auth

MAX_REQUEST_HEAD = 16384
LOGIN_TIMEOUT = 300.0
_PAGE = ("<!doctype html><title>toolbridge</title><p>{}</p>"
         "<p>You can close this window and return to the terminal.</p>")


@dataclass
class _Callback:
    """The redirect's query, once one arrived."""

    server: str
    result: AuthorizationCodeResult | None = None
    refused: str | None = None
    failure: UpstreamError | None = None
    arrived: anyio.Event = field(default_factory=anyio.Event)

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        """Answer one HTTP request; a peer that hangs up or dawdles is dropped, never fatal."""
        async with stream:
            head = b""
            try:
                with anyio.move_on_after(10):
                    while b"\r\n\r\n" not in head and len(head) < MAX_REQUEST_HEAD:
                        head += await stream.receive()
                status, message = self._take(head.split(b"\r\n", 1)[0].decode("latin-1"))
                body = _PAGE.format(html.escape(message)).encode()
                await stream.send(f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
                                  f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return

    def _take(self, request_line: str) -> tuple[str, str]:
        method, _, rest = request_line.partition(" ")
        target = rest.partition(" ")[0]
        parts = urlsplit(target)
        if method != "GET" or parts.path != "/callback" or self.arrived.is_set():
            return "404 Not Found", "Nothing to see here."
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if "error" in query:
            self.refused = query["error"]
            self.arrived.set()
            return "200 OK", f"Authorization was not granted ({query['error']})."
        if "code" not in query:
            return "400 Bad Request", "The redirect carried no authorization code."
        self.result = AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
        self.arrived.set()
        return "200 OK", f"toolbridge is now authorized for {self.server}."

    async def wait(self, timeout: float) -> AuthorizationCodeResult:
        with anyio.move_on_after(timeout):
            await self.arrived.wait()
        if self.result is not None:
            return self.result
        why = f"the authorization was refused ({self.refused})" if self.refused else f"no redirect within {timeout:g} s"
        self.failure = UpstreamRefused(self.server, why)
        raise self.failure

    def check_not_failed(self) -> None:
        """A failed flow is final: the client's protocol fallback must not ask the user twice."""
        if self.failure is not None:
            raise self.failure


async def login(
    config: UpstreamConfig, config_dir: Path, *, show_url: OpenUrl, timeout: float = LOGIN_TIMEOUT,
    scope: str | None = None,
) -> int:
    """Authorize toolbridge for `config` (an `auth: oauth` upstream); returns how many tools it has.

    Already-valid stored tokens are used as they are, unless `scope` names one a request needed that they
    lack (a step-up): then the user is asked for it; a refresh or a new consent is stored.

    Raises:
        UpstreamRefused: the redirect port is taken, the user refused, or nothing arrived in time.
        UpstreamError: the server could not be reached or authorized.
    """
    assert config.auth is not None
    callback = _Callback(config.name)
    try:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=config.auth.redirect_port)
    except OSError as exc:
        raise UpstreamRefused(config.name, f"cannot listen on 127.0.0.1:{config.auth.redirect_port} for the "
                                           f"redirect ({exc.strerror}); set auth.redirect_port") from exc

    async def open_url(url: str) -> None:
        callback.check_not_failed()
        try:
            await show_url(url)
        except UpstreamError as exc:
            callback.failure = exc
            raise

    async def wait_for_code() -> AuthorizationCodeResult:
        return await callback.wait(timeout)

    auth = oauth_auth(config, config_dir, open_url=open_url, wait_for_code=wait_for_code, scope=scope)
    failure: UpstreamError | None = None
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, callback.handle)
        try:
            async with connect(config, config_dir=config_dir, log_dir=config_dir / "logs", auth=auth,
                               mode=config.client_mode) as conn:
                count = len(await conn.list_tools())
        except UpstreamError as exc:
            failure = exc  # raised outside the listener's task group, not wrapped in a group
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return count


async def login_by_elicitation(
    config: UpstreamConfig, config_dir: Path, channel: BackChannel, *, timeout: float = LOGIN_TIMEOUT,
    scope: str | None = None,
) -> None:
    """Ask the calling session to open the authorization URL (URL-mode elicitation), then finish the login
    (asking for `scope`, the one a request was refused without, when given).

    Raises:
        UpstreamNeedsAuth: the client cannot show a URL, or the user declined.
        UpstreamError: the authorization failed otherwise (refused at the server, timed out).
    """
    async def ask(url: str) -> None:
        params = types.ElicitRequestURLParams(
            message=f"toolbridge needs your authorization to use {config.name}: sign in at this link.",
            url=url, elicitation_id=secrets.token_urlsafe(16),
        )
        answer = await channel.elicit(params)
        if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
            raise UpstreamNeedsAuth(config.name)

    await login(config, config_dir, show_url=ask, timeout=timeout, scope=scope)
