"""`logging/setLevel` per session, and upstream log messages that belong to no call.

A session's level filters what it receives; it is also forwarded to the servers in its scope that
take `logging/setLevel` (on a shared connection the last level set there wins, so each session's
own filter is what holds). A log message tied to a call goes to that call's caller (see
`proxy.upstream.InFlight`); one tied to none goes to the sessions that set a level admitting it
and have the server in scope, unless they act for a user of their own (an OAuth subject): the
message may be about another user's call (two calls in flight on a handshake-era connection), and
the one who sees a shared upstream's words about a call must be its caller.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

import anyio
from mcp import types

from proxy.downstream.rounds._session_channel import admits, log_notification
from proxy.downstream.session import Caller, RequestContext, Upstreams
from proxy.errors import ToolbridgeError
from proxy.views import Views

logger = logging.getLogger(__name__)

_MAX_SESSIONS = 4096
_SEND_TIMEOUT = 5.0
# Messages no call claimed, on their way at once: past it an upstream's are dropped (and counted), so a flood
# towards slow sessions costs a bounded queue, not a blocked delivery per message.
MAX_DELIVERING = 256


@dataclass
class _Listener:
    level: types.LoggingLevel
    profile: str
    send: Callable[[types.LoggingMessageNotification], Awaitable[None]]
    shares_upstreams: bool  # acts for no user of its own (stdio, or HTTP without per-user tokens)


class SessionLogs:
    """Each session's log level, and delivery of the log messages no call claimed."""

    def __init__(self, views: Views, upstreams: Upstreams) -> None:
        self.views = views
        self.upstreams = upstreams
        self._sessions: OrderedDict[Hashable, _Listener] = OrderedDict()
        self._delivering = 0
        self.dropped = 0

    def level(self, key: Hashable | None) -> types.LoggingLevel | None:
        listener = self._sessions.get(key) if key is not None else None
        return listener.level if listener is not None else None

    def forget(self, key: Hashable) -> None:
        self._sessions.pop(key, None)

    async def set_level(
        self, ctx: RequestContext, who: Caller, profile: str, level: types.LoggingLevel
    ) -> types.EmptyResult:
        if (key := who.session) is not None:
            shares = not who.personal
            self._sessions[key] = _Listener(level, profile, ctx.session.send_notification, shares)
            self._sessions.move_to_end(key)
            while len(self._sessions) > _MAX_SESSIONS:
                self._sessions.popitem(last=False)
        for server in self.views.for_profile(profile).servers:
            if self.upstreams.logs(server):
                try:
                    await self.upstreams.request(server, "logging/setLevel", lambda c: c.set_logging_level(level))
                except ToolbridgeError as exc:
                    logger.info("%s", exc)
        return types.EmptyResult()

    async def deliver(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        if self._delivering >= MAX_DELIVERING:
            if not self.dropped:
                logger.warning("upstream log messages arrive faster than sessions read them; dropping some")
            self.dropped += 1
            return
        self._delivering += 1
        try:
            await self._deliver(server, params)
        finally:
            self._delivering -= 1

    async def _deliver(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        notification = log_notification(server, params)
        for key, listener in list(self._sessions.items()):
            in_scope = server in self.views.for_profile(listener.profile).servers
            if not (in_scope and listener.shares_upstreams and admits(listener.level, params.level)):
                continue
            with anyio.move_on_after(_SEND_TIMEOUT):
                try:
                    await listener.send(notification)
                    continue
                except Exception as exc:  # a dead session must not stop the others' logs
                    logger.debug("dropping a log listener whose connection failed: %s", exc)
            self.forget(key)
