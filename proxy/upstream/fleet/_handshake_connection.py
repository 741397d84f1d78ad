"""A `protocol: auto` HTTP server's second connection, in the handshake era, opened when a caller first needs it.

A server that speaks both eras is connected in the 2026-07-28 era: its listings, cache hints, extensions,
listen stream, tasks and input-required rounds come from there. But a tool written the handshake-era way asks
its client over a back channel while it runs, which a 2026-07-28 connection does not have: the request fails
inside the tool, which may well report the failure in its result, where toolbridge cannot tell it from any
other. A caller that speaks the handshake era has that back channel, so its requests go here, where the server
has one too; a 2026-era caller's stay on the first connection, as they would reach the server directly. Nothing
is switched for everyone, so no call of one era is ever caught in a reconnect made for the other. Over HTTP
both sessions reach the one server process; a stdio server is a process per connection, so it is reconnected
in the handshake era instead (`Member.with_back_channel`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import anyio
from mcp import MCPError

from proxy.errors import UpstreamError
from proxy.upstream.connection import Connection

logger = logging.getLogger(__name__)

OpenConnection = Callable[[], AbstractAsyncContextManager[Connection]]


class HandshakeConnection:
    """The handshake-era twin of one first connection (`first`), open while a caller needs it and the first
    lives; `run` owns it (enters and leaves it in its own task)."""

    def __init__(
        self, first: Connection, open_connection: OpenConnection, *, keepalive: float, keepalive_timeout: float
    ) -> None:
        self.first = first
        self.connection: Connection | None = None
        self.unavailable = False  # it could not be opened: the server does not speak the handshake era
        self._open = open_connection
        self._keepalive = keepalive
        self._keepalive_timeout = keepalive_timeout
        self._wanted = anyio.Event()
        self._changed = anyio.Event()

    async def get(self, timeout: float) -> Connection | None:
        """The live connection, opened first if need be; None when the server does not speak the handshake era
        or it is not up within `timeout` (the caller then uses the first connection)."""
        with anyio.move_on_after(timeout):
            while self.connection is None or self.connection.signals.lost:
                if self.unavailable:
                    return None
                self._wanted.set()
                await self._changed.wait()
        conn = self.connection
        return conn if conn is not None and not conn.signals.lost else None

    async def run(self) -> None:
        """Open the connection whenever a caller wants it and keep it alive; until cancelled, or until it
        could not be opened (then the first connection serves every caller)."""
        while not self.unavailable:
            await self._wanted.wait()
            self._wanted = anyio.Event()
            try:
                async with self._open() as conn:
                    await conn.list_tools()  # the output schemas the SDK checks results against (`OutputSchemas`)
                    self._set(conn)
                    await self._serve(conn)
            except UpstreamError as exc:
                if self.connection is None:
                    logger.info(
                        "server %s: no handshake-era connection (%s); its 2026-07-28 connection serves every caller",
                        self.first.server,
                        exc.reason,
                    )
                    self.unavailable = True
                else:
                    logger.info("server %s: handshake-era connection closed (%s)", self.first.server, exc.reason)
            finally:
                self._set(None)

    async def _serve(self, conn: Connection) -> None:
        """Ask for every log message (each session's own level filters them downstream, as on the first
        connection); return when the connection is lost, raise when a keepalive goes unanswered."""
        if conn.logs:
            with anyio.move_on_after(self._keepalive_timeout), contextlib.suppress(MCPError):
                await conn.client.set_logging_level("debug")
        while True:
            await conn.signals.wait(self._keepalive, changes=False)  # list changes: the first connection's
            if conn.signals.lost:
                return
            await conn.keepalive(self._keepalive_timeout)

    def _set(self, conn: Connection | None) -> None:
        self.connection = conn
        self._changed.set()
        self._changed = anyio.Event()
