"""The tools each sessionless client used, as every replica sees them (`promote: N` over 2026-era HTTP).

A 2026-era request may land on any replica. The tools its client was promoted must be listed by
all of them alike, and a call to one of them answered by any of them, so the record lives in
Redis, one short JSON list per client, expiring a week after its last use.
"""

from __future__ import annotations

import hashlib
import json
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

__all__ = ["PROMOTION_TTL", "SharedPromotions"]

PROMOTION_TTL = 7 * 24 * 3600
KEY_PREFIX = "toolbridge:promoted:"
logger = logging.getLogger(__name__)


class SharedPromotions:
    """Each client's used tools, least recently used first, keyed by a hash of the client's identity."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def load(self, client: str) -> list[str] | None:
        """What `client` used, as recorded by any replica; None when Redis cannot say (keep what is known)."""
        try:
            raw = await self.redis.get(_key(client))
        except RedisError as exc:
            logger.warning("shared promotions unavailable (%s)", type(exc).__name__)
            return None
        try:
            names = json.loads(raw) if raw is not None else []
        except ValueError:
            return None
        return names if isinstance(names, list) and all(isinstance(n, str) for n in names) else None

    async def save(self, client: str, names: list[str]) -> None:
        try:
            await self.redis.set(_key(client), json.dumps(names), ex=PROMOTION_TTL)
        except RedisError as exc:
            logger.warning("shared promotions not saved (%s)", type(exc).__name__)


def _key(client: str) -> str:
    return KEY_PREFIX + hashlib.sha256(client.encode()).hexdigest()
