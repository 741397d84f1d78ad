"""Each upstream's last good catalog in Redis, so any replica (a new one too) can list the fleet at once.

The fleet reads its catalog cache synchronously while it starts and writes it from its supervisors,
so this cache keeps an in-memory mirror of one Redis hash (`toolbridge:catalogs`, a field per
server): `run()` fills the mirror before it reports started, and writes go out from its task
without blocking the caller (the latest catalog per server wins). An entry holds the key of the
config it was listed under (command or URL, environment, headers, filters: `key(config)`), so an
edited server's old catalog never applies. Redis being down is a miss and a logged warning, never an error.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import anyio
from mcp import types
from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from proxy.config import UpstreamConfig

__all__ = ["CatalogCache", "RedisCatalogCache"]

HASH = "toolbridge:catalogs"
FORMAT = 1
logger = logging.getLogger(__name__)


class CatalogCache(Protocol):
    """What the fleet asks of a catalog cache: the tools listed under exactly this config, or None."""

    def load(self, config: UpstreamConfig) -> list[types.Tool] | None: ...

    def store(self, config: UpstreamConfig, tools: Sequence[types.Tool]) -> None: ...


class RedisCatalogCache:
    """A `CatalogCache` every replica shares; start `run` in a task group before the fleet."""

    def __init__(self, redis: Redis, key: Callable[[UpstreamConfig], str]) -> None:
        self.redis = redis
        self.key = key
        self._mirror: dict[str, bytes] = {}
        self._unwritten: dict[str, bytes] = {}
        self._written = anyio.Event()

    def load(self, config: UpstreamConfig) -> list[types.Tool] | None:
        raw = self._mirror.get(config.name)
        if raw is None:
            return None
        try:
            document = json.loads(raw)
            if document.get("format") != FORMAT or document.get("key") != self.key(config):
                return None
            return [types.Tool.model_validate(tool) for tool in document["tools"]]
        except (ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
            logger.warning("server %s: shared catalog cache entry invalid (%s); starting it to relist",
                           config.name, type(exc).__name__)
            return None

    def store(self, config: UpstreamConfig, tools: Sequence[types.Tool]) -> None:
        wire = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools]
        raw = json.dumps({"format": FORMAT, "key": self.key(config), "tools": wire}, ensure_ascii=False,
                         separators=(",", ":")).encode()
        self._mirror[config.name] = self._unwritten[config.name] = raw
        self._written.set()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Fill the mirror from Redis, report started, then write out what is stored (the latest per server)."""
        try:
            entries = await self.redis.hgetall(HASH)
            self._mirror.update({name.decode(): raw for name, raw in entries.items()})
        except RedisError as exc:
            logger.warning("shared catalog cache unreachable (%s); every server starts to list", type(exc).__name__)
        task_status.started()
        while True:
            await self._written.wait()
            self._written = anyio.Event()
            batch, self._unwritten = self._unwritten, {}
            try:
                await self.redis.hset(HASH, mapping=batch)
            except RedisError as exc:
                logger.warning("could not write the shared catalog cache for %s (%s)", ", ".join(sorted(batch)),
                               type(exc).__name__)
