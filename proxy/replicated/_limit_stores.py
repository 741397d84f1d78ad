"""Where the buckets of `limits:` are counted: this process (`MemoryLimitStore`), or Redis for every
replica (`proxy/replicated/_redis_limits.py`). Both take a call's buckets all or nothing, so a call
refused by one limit spends nothing of another.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from proxy.replicated._limits import WINDOW, Bucket, Kind, Usage, window_wait

__all__ = ["LimitStore", "MemoryLimitStore", "Refusal"]


@dataclass(frozen=True)
class Refusal:
    """The bucket that had no room, and (for calls per minute) the seconds until it has."""

    bucket: Bucket
    retry_after: float | None


class LimitStore(Protocol):
    """Counts buckets. `acquire` takes a call (a minute's stamp, a running slot) in every bucket or in
    none; `release` gives the slots back; `renew` keeps a running call's slots from expiring."""

    lease_seconds: float | None  # how long a slot outlives its last renewal; None: it never expires

    async def acquire(self, buckets: Sequence[Bucket], lease: str) -> Refusal | None: ...

    async def release(self, buckets: Sequence[Bucket], lease: str) -> None: ...

    async def renew(self, buckets: Sequence[Bucket], lease: str) -> None: ...

    def usage(self) -> dict[tuple[str, str], Usage]: ...


class MemoryLimitStore:
    """This process's counts: each bucket's call times of the last minute, and its running calls.

    One event loop and no await inside a method: each method is atomic.
    """

    lease_seconds = None

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._stamps: dict[tuple[str, str], deque[float]] = {}
        self._held: dict[tuple[str, str], int] = {}

    async def acquire(self, buckets: Sequence[Bucket], lease: str) -> Refusal | None:
        now = self.clock()
        for bucket in buckets:
            slot = (bucket.limit, bucket.key)
            if bucket.kind is Kind.CALLS:
                stamps = self._fresh(slot, now)
                if wait := window_wait(stamps, now, bucket.allowed):
                    return Refusal(bucket, wait)
            elif self._held.get(slot, 0) >= bucket.allowed:
                return Refusal(bucket, None)
        for bucket in buckets:
            slot = (bucket.limit, bucket.key)
            if bucket.kind is Kind.CALLS:
                self._stamps.setdefault(slot, deque()).append(now)
            else:
                self._held[slot] = self._held.get(slot, 0) + 1
        return None

    async def release(self, buckets: Sequence[Bucket], lease: str) -> None:
        for bucket in buckets:
            slot = (bucket.limit, bucket.key)
            if bucket.kind is Kind.HELD and (held := self._held.get(slot, 0)):
                if held > 1:
                    self._held[slot] = held - 1
                else:
                    del self._held[slot]

    async def renew(self, buckets: Sequence[Bucket], lease: str) -> None:
        return None

    def usage(self) -> dict[tuple[str, str], Usage]:
        now = self.clock()
        for slot in list(self._stamps):
            self._fresh(slot, now)
        return {
            slot: Usage(len(self._stamps.get(slot, ())), self._held.get(slot, 0))
            for slot in sorted({*self._stamps, *self._held})
        }

    def _fresh(self, slot: tuple[str, str], now: float) -> deque[float]:
        """The slot's call times of the last minute; a slot with none is forgotten (memory stays bounded)."""
        stamps = self._stamps.get(slot)
        if stamps is None:
            return deque()
        while stamps and stamps[0] <= now - WINDOW:
            stamps.popleft()
        if not stamps:
            del self._stamps[slot]
        return stamps
