"""The secret toolbridge signs its handles with (task ids), the same on every replica.

With Redis, the first replica to start stores a random key (`SET NX`) and every other one reads it,
so a handle minted by one replica verifies on all. Without Redis, or with Redis down, the key is
this process's own: its handles verify here only, which is all a lone process needs.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["signing_key"]

KEY = "toolbridge:signing-key"
logger = logging.getLogger(__name__)


async def signing_key(redis: Redis | None) -> bytes:
    own = secrets.token_bytes(32)
    if redis is None:
        return own
    from redis.exceptions import RedisError

    try:
        await redis.set(KEY, own, nx=True)
        shared = await redis.get(KEY)
    except RedisError as exc:
        logger.warning("signing key not shared (Redis: %s); task ids verify on this replica only",
                       type(exc).__name__)
        return own
    return shared if isinstance(shared, bytes) and len(shared) >= 32 else own
