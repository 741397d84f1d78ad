"""How often one server is re-listed: a token bucket.

Re-listing re-names the whole fleet, so a server announcing a change with every listing would keep a
core busy (`bench.list_changed_storm`): beyond a short burst it is re-listed once per interval, its
changes in between merged into one. The burst is what keeps an ordinary server's changes prompt: a
change after a quiet spell, and the next one right after it, are listed at once.
"""

from __future__ import annotations

import math

__all__ = ["RelistBudget"]


class RelistBudget:
    """`burst` re-listings in a row after a quiet spell, refilled one per `interval`."""

    def __init__(self, *, burst: int, interval: float, now: float) -> None:
        self._burst = burst
        self._interval = interval
        self._tokens = float(burst)
        self._at = now

    def _refill(self, now: float) -> None:
        refilled = (now - self._at) / self._interval if self._interval > 0 else math.inf  # 0: no limit
        self._tokens = min(self._burst, self._tokens + refilled)
        self._at = now

    def next_at(self, now: float) -> float:
        """When the next re-listing may run: `now`, or later once the bucket has a whole token."""
        self._refill(now)
        return now if self._tokens >= 1 else now + (1 - self._tokens) * self._interval

    def spend(self, now: float) -> None:
        """A re-listing ran at `now` (the caller waited for `next_at`)."""
        self._refill(now)
        self._tokens = max(0.0, self._tokens - 1)
