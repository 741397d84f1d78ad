"""Taking turns, as a rule but never for long: the fleet's listings, one answer parsed at a time.

Each listing parses a whole `tools/list` answer (~12 MB of transient objects per 500 tools) while
the registry and the SDK keep small objects from it for good. Interleaved, many answers' transients
sit between those long-lived objects, and the allocators cannot give their memory back: at 50,000
tools that was several MB of resident memory for nothing. On one event loop, one listing at a time
costs no CPU. A server slow to answer holds the turn for at most `patience`: whoever waits longer
goes ahead anyway, so one hanging upstream never stops the others from being listed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class Turns:
    def __init__(self, patience: float) -> None:
        self._lock = anyio.Lock()
        self._patience = patience

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold the turn for the body, once it comes or `patience` has passed (then without it)."""
        held = False
        with anyio.move_on_after(self._patience):
            await self._lock.acquire()
            held = True
        try:
            yield
        finally:
            if held:
                self._lock.release()
