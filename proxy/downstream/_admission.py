"""Room for new handshake-era HTTP sessions: a cap per principal and in all, idle sessions evicted first.

The SDK's session manager refuses every new session (503) while `max_sessions` are open, and an
initialized-then-abandoned session stays open until its idle timeout (30 minutes): one client
could lock every other out. Here each session is counted against its principal (the OAuth
subject, else a hash of the bearer token presented, else the client's address), and a new
session that would pass a cap takes the place of the least recently active idle session (no
request in flight, no open stream): the principal's own at its cap, the largest holder's at the
global one. A session with a request in flight is never evicted; when no idle one can go, the
new session is refused (503) as the SDK would. 2026-era requests are sessionless and pass through.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SessionAdmission", "principal_of"]

logger = logging.getLogger(__name__)

_SESSION_HEADER = "mcp-session-id"
_VERSION_HEADER = "mcp-protocol-version"


def principal_of(scope: Scope) -> str:
    """Who opens a session: the OAuth token's subject, a hash of a bearer token, or the client address."""
    token = getattr(scope.get("user"), "access_token", None)
    if token is not None:
        return f"subject:{token.subject or token.client_id}"
    scheme, _, presented = Headers(scope=scope).get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and presented.strip():
        return "token:" + hashlib.sha256(presented.strip().encode()).hexdigest()[:16]
    client = scope.get("client")
    return f"address:{client[0] if client else '-'}"


@dataclass
class _Session:
    principal: str
    opening: Scope  # the scope of the request that opened it: what closing it must present again
    last_active: float
    in_flight: int = 0


class SessionAdmission:
    """Counts the handshake-era sessions the SDK opened, by principal, and closes idle ones to make room.

    `app` is what serves a session request (the SDK's session manager); `forget` is told of an
    evicted session as of one its client deleted. Sessions the SDK reaped for idleness
    (`idle_timeout`) are dropped from the count by time.
    """

    def __init__(self, app: ASGIApp, *, max_sessions: int, max_per_principal: int, idle_timeout: float,
                 forget: Callable[[Hashable], None] | None = None) -> None:
        self.app = app
        self.max_sessions = max_sessions
        self.max_per_principal = max_per_principal
        self.idle_timeout = idle_timeout
        self.forget = forget
        self._sessions: dict[str, _Session] = {}
        self._opening: dict[str, int] = {}
        self.evictions = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        version = headers.get(_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self.app(scope, receive, send)
            return
        session_id = headers.get(_SESSION_HEADER)
        if session_id is None and scope["method"] == "POST":
            await self._open(scope, receive, send)
        elif session_id is not None and session_id in self._sessions:
            await self._serve(session_id, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = principal_of(scope)
        if not await self._make_room(principal):
            logger.warning("refusing a new session: every one of the %d open sessions has a request in flight",
                           len(self._sessions))
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "Too many open sessions"}}
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                issued = Headers(raw=message.get("headers", [])).get(_SESSION_HEADER)
                if issued is not None:
                    self._sessions[issued] = _Session(principal, scope, time.monotonic())
            await send(message)

        self._opening[principal] = self._opening.get(principal, 0) + 1
        try:
            await self.app(scope, receive, watched)
        finally:
            self._opening[principal] -= 1
            if not self._opening[principal]:
                del self._opening[principal]

    async def _serve(self, session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a request of a known session, counting it in flight; a 404 or a DELETE ends the session."""
        session = self._sessions[session_id]
        status = 0

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        session.in_flight += 1
        session.last_active = time.monotonic()
        try:
            await self.app(scope, receive, watched)
        finally:
            session.in_flight -= 1
            session.last_active = time.monotonic()
            if status == 404 or (scope["method"] == "DELETE" and 200 <= status < 300):
                self._sessions.pop(session_id, None)

    async def _make_room(self, principal: str) -> bool:
        """Evict what the caps require for one more session of `principal`; False when that cannot be done."""
        self._drop_expired()
        held = self._count(principal) + self._opening.get(principal, 0)
        if held >= self.max_per_principal:
            victim = self._idle_oldest(principal)
            if victim is None:
                return False
            await self._evict(victim, f"its principal holds {held} sessions (at most {self.max_per_principal})")
        total = len(self._sessions) + sum(self._opening.values())
        if total >= self.max_sessions:
            victim = self._idle_oldest(self._largest_holder())
            if victim is None:
                return False
            await self._evict(victim, f"{total} sessions are open (at most {self.max_sessions})")
        return True

    def _count(self, principal: str) -> int:
        return sum(1 for s in self._sessions.values() if s.principal == principal)

    def _largest_holder(self) -> str | None:
        """The principal with the most idle sessions (ties: the one whose idle session is oldest)."""
        idle: dict[str, tuple[int, float]] = {}
        for s in self._sessions.values():
            if not s.in_flight:
                count, oldest = idle.get(s.principal, (0, s.last_active))
                idle[s.principal] = (count + 1, min(oldest, s.last_active))
        return max(idle, key=lambda p: (idle[p][0], -idle[p][1]), default=None)

    def _idle_oldest(self, principal: str | None) -> str | None:
        candidates = [(s.last_active, sid) for sid, s in self._sessions.items()
                      if s.principal == principal and not s.in_flight]
        return min(candidates)[1] if candidates else None

    def _drop_expired(self) -> None:
        """Forget sessions the SDK has reaped: idle for longer than its timeout."""
        cutoff = time.monotonic() - self.idle_timeout
        for sid in [sid for sid, s in self._sessions.items() if not s.in_flight and s.last_active < cutoff]:
            del self._sessions[sid]

    async def _evict(self, session_id: str, why: str) -> None:
        """Close the session through the SDK as its client would (DELETE, same credential)."""
        session = self._sessions.pop(session_id)
        logger.info("closing idle session %s to make room: %s", session_id[:16], why)
        self.evictions += 1
        opening = session.opening
        headers = [(b"mcp-session-id", session_id.encode())]
        headers += [(n, v) for n, v in opening["headers"] if n.lower() in (b"host", b"authorization")]
        scope = {**opening, "method": "DELETE", "headers": headers}

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            pass

        await self.app(scope, receive, discard)
        if self.forget is not None:
            self.forget(session_id)
