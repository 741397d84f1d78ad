"""The state replicas share, opened once per process: Redis when `redis_url` is set, else this process.

Only what must outlive a replica or be seen by another goes here: the large-result store, the
cached upstream catalogs, sessionless clients' promotions, the counts of `limits:` and the key handles are signed and
`requestState` is sealed with. Everything else (sessions, upstream connections, the registry) is
per replica by design: each replica runs its own fleet from the same config dir, so each sees the
same upstream changes itself and tells its own sessions (no subscription bus between replicas).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mcp import types

from proxy.config import UpstreamConfig
from proxy.errors import redact
from proxy.replicated._limit_stores import LimitStore, MemoryLimitStore
from proxy.replicated._results import MemoryResultStore, ResultStore

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from proxy.replicated._redis import RedisCatalogCache, SharedPromotions

__all__ = ["RESULT_TTL", "CatalogCache", "SharedState", "open_shared_state"]

RESULT_TTL = 3600.0  # a result link stays readable this long
MEMORY_RESULT_CHARS = 50_000_000  # the in-process store's bound, oldest out first
logger = logging.getLogger(__name__)


class CatalogCache(Protocol):
    """What the fleet asks of a catalog cache: the tools listed under exactly this config, or None."""

    def load(self, config: UpstreamConfig) -> list[types.Tool] | None: ...

    def store(self, config: UpstreamConfig, tools: Sequence[types.Tool]) -> None: ...


@dataclass
class SharedState:
    results: ResultStore
    redis: Redis | None = None

    def catalog_cache(self, key: Callable[[UpstreamConfig], str]) -> RedisCatalogCache | None:
        """The shared catalog cache (start its `run` before the fleet), or None: keep the on-disk one."""
        if self.redis is None:
            return None
        from proxy.replicated._redis import RedisCatalogCache

        return RedisCatalogCache(self.redis, key)

    def promotions(self) -> SharedPromotions | None:
        """Sessionless clients' promotions, seen by every replica; None: this process is the only one."""
        if self.redis is None:
            return None
        from proxy.replicated._redis import SharedPromotions

        return SharedPromotions(self.redis)


    def limit_store(self) -> LimitStore:
        """Where `limits:` are counted: in Redis for every replica, else in this process."""
        if self.redis is None:
            return MemoryLimitStore()
        from proxy.replicated._redis_limits import RedisLimitStore

        return RedisLimitStore(self.redis)

    async def signing_key(self) -> bytes:
        """The key task ids are signed and `requestState` is sealed with: one for every replica sharing this Redis."""
        from proxy.replicated._signing import signing_key

        return await signing_key(self.redis)


@asynccontextmanager
async def open_shared_state(redis_url: str | None) -> AsyncIterator[SharedState]:
    """In-process stores without `redis_url`; with it, Redis (an unreachable server is logged, and retried
    by each use: the client reconnects)."""
    if not redis_url:
        yield SharedState(MemoryResultStore(ttl=RESULT_TTL, max_chars=MEMORY_RESULT_CHARS))
        return
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    from proxy.replicated._redis import RedisResultStore

    redis = Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=10, health_check_interval=30)
    try:
        try:
            await redis.ping()
            logger.info("shared state in Redis at %s", redact(redis_url))
        except RedisError as exc:
            logger.warning("Redis at %s unreachable (%s); shared state fails until it is back",
                           redact(redis_url), type(exc).__name__)
        yield SharedState(RedisResultStore(redis, ttl=RESULT_TTL), redis)
    finally:
        await redis.aclose()
