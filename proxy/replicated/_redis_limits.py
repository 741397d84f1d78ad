"""The buckets of `limits:` in Redis, so every replica counts the same calls.

Each bucket is a sorted set. A calls-per-minute bucket holds one member per call scored by its time,
and calls older than a minute are dropped before counting (the sliding log of `_limits`). A
concurrency bucket holds one member per running call scored by when its lease expires: the replica
running the call renews it, and a replica that dies stops renewing, so its slots come back within
`LEASE_SECONDS` instead of leaking. One Lua script checks and takes every bucket of a call at once,
on Redis's clock (replicas' clocks may disagree). Redis being down admits the call, logged: limits
are a fairness control, and a replica never stops serving for want of shared state.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence

from redis.asyncio import Redis
from redis.exceptions import RedisError

from proxy.replicated._limit_stores import Refusal
from proxy.replicated._limits import WINDOW, Bucket, Kind, Usage

__all__ = ["LEASE_SECONDS", "RedisLimitStore"]

LEASE_SECONDS = 30.0
KEY_PREFIX = "toolbridge:limit:"
logger = logging.getLogger(__name__)

# KEYS: the buckets. ARGV: lease, window, lease seconds, then a kind and an allowance per bucket.
# Returns {refusing bucket's index (0: none), seconds until it has room, then the refusing bucket's count or
# each bucket's count after taking the call}.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local lease, window, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local counts = {}
for i, key in ipairs(KEYS) do
  local kind, allowed = ARGV[2 + 2 * i], tonumber(ARGV[3 + 2 * i])
  if kind == 'calls' then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  else
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  end
  local n = redis.call('ZCARD', key)
  counts[i] = n
  if n >= allowed then
    local wait = 0
    if kind == 'calls' then
      local oldest = redis.call('ZRANGE', key, n - allowed, n - allowed, 'WITHSCORES')
      wait = tonumber(oldest[2]) + window - now
    end
    return {i, tostring(wait), n}
  end
end
for i, key in ipairs(KEYS) do
  if ARGV[2 + 2 * i] == 'calls' then
    redis.call('ZADD', key, now, lease)
    redis.call('PEXPIRE', key, math.ceil(window * 1000) + 1000)
  else
    redis.call('ZADD', key, now + ttl, lease)
    redis.call('PEXPIRE', key, math.ceil(ttl * 1000) + 1000)
  end
  counts[i] = counts[i] + 1
end
return {0, '0', unpack(counts)}
"""

# KEYS: a call's concurrency buckets. ARGV: lease, lease seconds. Pushes the lease's expiry forward.
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', key, math.ceil(tonumber(ARGV[2]) * 1000) + 1000)
end
return 0
"""


class RedisLimitStore:
    """Every replica's counts. `usage()` is what this replica last saw of each bucket (from its own
    calls): `/status` is synchronous and each replica reports its own view."""

    def __init__(self, redis: Redis, *, lease_seconds: float = LEASE_SECONDS) -> None:
        self.redis = redis
        self.lease_seconds = lease_seconds
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._seen: dict[tuple[str, str], tuple[Usage, float]] = {}  # and when it was seen

    async def acquire(self, buckets: Sequence[Bucket], lease: str) -> Refusal | None:
        arguments: list[str | float] = [lease, WINDOW, self.lease_seconds]
        for bucket in buckets:
            arguments += [bucket.kind.value, bucket.allowed]
        try:
            answer = await self._acquire(keys=[_key(bucket) for bucket in buckets], args=arguments)
        except RedisError as exc:
            logger.warning("limits unavailable in Redis (%s); the call is admitted", type(exc).__name__)
            return None
        refusing, wait, counts = int(answer[0]), float(answer[1]), [int(count) for count in answer[2:]]
        if refusing:
            bucket = buckets[refusing - 1]
            self._see(bucket, counts[0])
            return Refusal(bucket, wait if bucket.kind is Kind.CALLS else None)
        for bucket, count in zip(buckets, counts, strict=True):
            self._see(bucket, count)
        return None

    async def release(self, buckets: Sequence[Bucket], lease: str) -> None:
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                for bucket in buckets:
                    pipe.zrem(_key(bucket), lease)
                    pipe.zcard(_key(bucket))
                answers = await pipe.execute()
        except RedisError as exc:
            logger.warning(
                "limits: slots not released in Redis (%s); they expire within %.0f s",
                type(exc).__name__,
                self.lease_seconds,
            )
            return
        for bucket, count in zip(buckets, answers[1::2], strict=True):
            self._see(bucket, int(count))

    async def renew(self, buckets: Sequence[Bucket], lease: str) -> None:
        try:
            await self._renew(keys=[_key(bucket) for bucket in buckets], args=[lease, self.lease_seconds])
        except RedisError as exc:
            logger.warning("limits: leases not renewed in Redis (%s)", type(exc).__name__)

    def usage(self) -> dict[tuple[str, str], Usage]:
        """What this replica last saw of each bucket it used within the minute, or holds a slot of."""
        now = time.monotonic()
        for slot, (usage, seen) in list(self._seen.items()):
            if not usage.held and seen <= now - WINDOW:
                del self._seen[slot]
        return {slot: usage for slot, (usage, _) in sorted(self._seen.items())}

    def _see(self, bucket: Bucket, count: int) -> None:
        slot = (bucket.limit, bucket.key)
        seen = self._seen.get(slot, (Usage(0, 0), 0.0))[0]
        usage = Usage(count, seen.held) if bucket.kind is Kind.CALLS else Usage(seen.calls, count)
        self._seen[slot] = (usage, time.monotonic())


def _key(bucket: Bucket) -> str:
    """The bucket's Redis key: the principal (or profile) as a digest, since it is any text a token carries."""
    digest = hashlib.sha256(bucket.key.encode()).hexdigest()[:32]
    return f"{KEY_PREFIX}{bucket.limit}:{bucket.kind.value}:{digest}"
