"""How a downstream request that may need its caller's input reaches it, in either era.

A handshake-era session is asked on its own stream (`SessionChannel`); a 2026-era request runs across
input-required rounds (`RoundTrips`). `tools/call`, `prompts/get` and `resources/read` may all need
input (SEP-2322).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from mcp import types

from proxy.downstream.rounds._input_rounds import RoundTrips
from proxy.downstream.rounds._session_channel import SessionChannel
from proxy.downstream.rounds._session_logs import SessionLogs
from proxy.downstream.session import RequestContext, caller, handshake_era, in_profile
from proxy.protocol import BackChannel

R = TypeVar("R")


class WayBack:
    """Runs a request with the back channel its caller's era has."""

    def __init__(self, round_trips: RoundTrips, logs: SessionLogs) -> None:
        self.round_trips = round_trips
        self.logs = logs

    async def run(
        self, ctx: RequestContext, profile: str, params: types.InputResponseRequestParams,
        run: Callable[[BackChannel], Awaitable[R]],
    ) -> R | types.InputRequiredResult:
        """`run`'s result; for a 2026-era caller in `profile`, or the next round's input requests.

        Raises:
            MCPError: as `RoundTrips.call`, or what `run` raised.
        """
        if handshake_era(ctx):
            key = caller(ctx).session
            return await run(SessionChannel(ctx, lambda: self.logs.level(key)))
        return await self.round_trips.call(ctx, in_profile(caller(ctx).principal, profile), params, run)
