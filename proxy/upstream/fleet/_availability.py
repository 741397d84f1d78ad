"""Whether a server's tools are offered now: the fleet's truth, smoothed over quick restarts."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass
class Availability:
    """Whether a server's tools are offered now, with a 30 s cache and a 60 s flake grace.

    `check(server)` asks the truth (is the upstream connected?). A failure within `grace`
    seconds of the last success is a flake: the last success stands and nothing is cached, so a
    server restarting quickly never blinks out of the listing.
    """

    check: Callable[[str], bool]
    clock: Callable[[], float] = time.monotonic
    ttl: float = 30.0
    grace: float = 60.0
    _cache: dict[str, tuple[bool, float]] = field(default_factory=dict)
    _last_success: dict[str, float] = field(default_factory=dict)

    def __call__(self, server: str) -> bool:
        now = self.clock()
        cached = self._cache.get(server)
        if cached is not None and now - cached[1] < self.ttl:
            return cached[0]
        if self.check(server):
            self._last_success[server] = now
            self._cache[server] = (True, now)
            return True
        last = self._last_success.get(server)
        if last is not None and now - last < self.grace:
            return True
        if cached is None or cached[0]:
            logger.warning("server %s is unavailable; its tools are withdrawn", server)
        self._cache[server] = (False, now)
        return False

    def forget(self, server: str) -> None:
        """Drop the cached answer so the next call asks `check` (on a known state change)."""
        self._cache.pop(server, None)
