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

import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.downstream.session import principal_of

__all__ = ["SessionAdmission", "StatusWatch"]

logger = logging.getLogger(__name__)

_SESSION_HEADER = "mcp-session-id"
_VERSION_HEADER = "mcp-protocol-version"


class StatusWatch:
    """An ASGI `send` that passes every message on and keeps the response's status (0 until it starts)."""

    def __init__(self, send: Send) -> None:
        self.send, self.status = send, 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self.send(message)


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
    (`idle_timeout`) are dropped from the count by time. Room is made once the SDK has opened the
    new session, so a request that opens none (not an `initialize`, or refused) evicts nobody.
    """

    def __init__(self, app: ASGIApp, *, max_sessions: int, max_per_principal: int, idle_timeout: float,
                 forget: Callable[[Hashable], None] | None = None) -> None:
        self.app = app
        self.max_sessions = max_sessions
        self.max_per_principal = max_per_principal
        self.idle_timeout = idle_timeout
        self.forget = forget
        self._sessions: dict[str, _Session] = {}
        self._by_principal: dict[str, dict[str, _Session]] = {}
        self._opening: dict[str, int] = {}

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
        if not self._room_possible(principal):
            logger.warning("refusing a new session: every session that could make room has a request in flight")
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "Too many open sessions"}}
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        issued: list[str] = []

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                session_id = Headers(raw=message.get("headers", [])).get(_SESSION_HEADER)
                if session_id is not None:
                    self._add(session_id, _Session(principal, scope, time.monotonic()))
                    issued.append(session_id)
            await send(message)

        self._opening[principal] = self._opening.get(principal, 0) + 1
        try:
            await self.app(scope, receive, watched)
        finally:
            self._opening[principal] -= 1
            if not self._opening[principal]:
                del self._opening[principal]
        if issued:
            await self._make_room(principal, keep=issued[0])

    async def _serve(self, session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a request of a known session, counting it in flight; a 404 or a DELETE ends the session."""
        session = self._sessions[session_id]
        watched = StatusWatch(send)
        session.in_flight += 1
        session.last_active = time.monotonic()
        try:
            await self.app(scope, receive, watched)
        finally:
            session.in_flight -= 1
            session.last_active = time.monotonic()
            if watched.status == 404 or (scope["method"] == "DELETE" and 200 <= watched.status < 300):
                self._remove(session_id)

    def _room_possible(self, principal: str) -> bool:
        """Whether one more session of `principal` fits, or an idle session could go for it."""
        own = len(self._by_principal.get(principal, ())) + self._opening.get(principal, 0)
        total = len(self._sessions) + sum(self._opening.values())
        if own < self.max_per_principal and total < self.max_sessions:
            return True
        self._drop_expired()
        if own >= self.max_per_principal and self._idle_oldest(principal) is None:
            return False
        return total < self.max_sessions or self._largest_holder() is not None

    async def _make_room(self, principal: str, keep: str) -> None:
        """Evict idle sessions until the caps hold again (never `keep`, the session just opened)."""
        while len(self._by_principal.get(principal, ())) > self.max_per_principal:
            victim = self._idle_oldest(principal, keep)
            if victim is None:
                return
            await self._evict(victim, f"its principal holds more than {self.max_per_principal} sessions")
        while len(self._sessions) > self.max_sessions:
            victim = self._idle_oldest(self._largest_holder(keep), keep)
            if victim is None:
                return
            await self._evict(victim, f"more than {self.max_sessions} sessions are open")

    def _add(self, session_id: str, session: _Session) -> None:
        self._sessions[session_id] = session
        self._by_principal.setdefault(session.principal, {})[session_id] = session

    def _remove(self, session_id: str) -> _Session | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            own = self._by_principal[session.principal]
            del own[session_id]
            if not own:
                del self._by_principal[session.principal]
        return session

    def _largest_holder(self, keep: str | None = None) -> str | None:
        """The principal with the most idle sessions (ties: the one whose idle session is oldest)."""
        best: tuple[int, float] | None = None
        chosen = None
        for principal, own in self._by_principal.items():
            idle = [s.last_active for sid, s in own.items() if not s.in_flight and sid != keep]
            if idle and (best is None or (len(idle), -min(idle)) > best):
                best, chosen = (len(idle), -min(idle)), principal
        return chosen

    def _idle_oldest(self, principal: str | None, keep: str | None = None) -> str | None:
        own = self._by_principal.get(principal, {}) if principal is not None else {}
        candidates = [(s.last_active, sid) for sid, s in own.items() if not s.in_flight and sid != keep]
        return min(candidates)[1] if candidates else None

    def _drop_expired(self) -> None:
        """Forget sessions the SDK has reaped: idle for longer than its timeout."""
        cutoff = time.monotonic() - self.idle_timeout
        for sid in [sid for sid, s in self._sessions.items() if not s.in_flight and s.last_active < cutoff]:
            self._remove(sid)

    async def _evict(self, session_id: str, why: str) -> None:
        """Close the session through the SDK as its client would (DELETE, same credential)."""
        session = self._remove(session_id)
        assert session is not None
        logger.info("closing idle session %s to make room: %s", session_id[:16], why)
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
