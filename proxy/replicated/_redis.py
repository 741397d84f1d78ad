"""What replicas share in Redis: each upstream's last good catalog, the large results, and the tools
each sessionless client was promoted.

Imported only when a Redis URL is given: the client library costs a process without one a tenth of
a second of start-up. The catalog cache lets any replica (a new one too) list the fleet at once.
The fleet reads it synchronously while it starts and writes it from its supervisors, so it keeps an
in-memory mirror of one Redis hash (`toolbridge:catalogs`, a field per server): `run()` fills the
mirror before it reports started, and writes go out from its task without blocking the caller (the
latest catalog per server wins). An entry holds the key of the config it was listed under (command
or URL, environment, headers, filters: `key(config)`), so an edited server's old catalog never
applies. Redis being down is a miss and a logged warning, never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence

import anyio
from mcp import types
from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from proxy.config import UpstreamConfig
from proxy.replicated._results import StoredResult, new_result_id

__all__ = ["RedisCatalogCache", "RedisResultStore", "SharedPromotions"]

HASH = "toolbridge:catalogs"
RESULT_PREFIX = "toolbridge:result:"
FORMAT = 1
logger = logging.getLogger(__name__)


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


class RedisResultStore:
    """Every replica's: one Redis hash per result (`text`, `owner`, `mime_type`), expiring after `ttl` seconds."""

    def __init__(self, redis: Redis, *, ttl: float) -> None:
        self.redis = redis
        self.ttl = ttl

    async def put(self, result: StoredResult) -> str:
        result_id = new_result_id()
        key = RESULT_PREFIX + result_id
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"text": result.text, "owner": result.owner, "mime_type": result.mime_type})
            pipe.pexpire(key, int(self.ttl * 1000))
            await pipe.execute()
        return result_id

    async def get(self, result_id: str) -> StoredResult | None:
        if not result_id.isalnum():
            return None
        fields = await self.redis.hgetall(RESULT_PREFIX + result_id)
        if not fields:
            return None
        # An entry without an owner (written before owners were kept) is nobody's: "" matches no reader.
        return StoredResult(text=fields[b"text"].decode(), owner=fields.get(b"owner", b"").decode(),
                            mime_type=fields[b"mime_type"].decode())


# A 2026-era request may land on any replica: the tools its client was promoted must be listed by
# all of them alike, and a call to one answered by any of them (`promote: N` over HTTP).
PROMOTION_TTL = 7 * 24 * 3600
PROMOTION_KEY_PREFIX = "toolbridge:promoted:"


class SharedPromotions:
    """Each client's used tools, least recently used first, keyed by a hash of the client's identity."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def load(self, client: str) -> list[str] | None:
        """What `client` used, as recorded by any replica; None when Redis cannot say (keep what is known)."""
        try:
            raw = await self.redis.get(_promotion_key(client))
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
            await self.redis.set(_promotion_key(client), json.dumps(names), ex=PROMOTION_TTL)
        except RedisError as exc:
            logger.warning("shared promotions not saved (%s)", type(exc).__name__)


def _promotion_key(client: str) -> str:
    return PROMOTION_KEY_PREFIX + hashlib.sha256(client.encode()).hexdigest()
