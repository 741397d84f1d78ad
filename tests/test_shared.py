"""Shared state: the large-result store and the catalog cache, in this process and in a real Redis."""

from __future__ import annotations

import anyio
import pytest
from inprocess import tool
from redis.asyncio import Redis
from servers.cluster import free_port

from proxy.config import UpstreamConfig
from proxy.replicated import (
    MemoryResultStore,
    RedisCatalogCache,
    RedisResultStore,
    SharedPromotions,
    StoredResult,
    open_shared_state,
)

pytestmark = pytest.mark.anyio


async def test_memory_results_expire_and_stay_within_their_bound() -> None:
    store = MemoryResultStore(ttl=60, max_chars=25)
    first = await store.put(StoredResult("a" * 10, "me"))
    second = await store.put(StoredResult("b" * 10, "me", "application/json"))
    assert await store.get(first) == StoredResult("a" * 10, "me")
    assert await store.get(second) == StoredResult("b" * 10, "me", "application/json")
    third = await store.put(StoredResult("c" * 10, "me"))
    assert await store.get(first) is None and await store.get(third) is not None
    assert await store.get("nope") is None
    expired = MemoryResultStore(ttl=0, max_chars=100)
    assert await expired.get(await expired.put(StoredResult("x", "me"))) is None


async def test_a_result_stored_by_one_replica_is_read_by_another_after_the_first_is_gone(redis_url: str) -> None:
    big = "résumé " * 40_000  # and its owner travels with it
    first = Redis.from_url(redis_url)
    result_id = await RedisResultStore(first, ttl=60).put(StoredResult(big, "alice", "text/markdown"))
    await first.aclose()
    async with open_shared_state(redis_url) as other:
        assert await other.results.get(result_id) == StoredResult(big, "alice", "text/markdown")
        assert await other.results.get("0" * 32) is None
        assert await other.results.get("../etc") is None
        assert other.redis is not None
        assert 0 < await other.redis.pttl(f"toolbridge:result:{result_id}") <= 60_000


async def test_without_a_redis_url_results_stay_in_this_process() -> None:
    async with open_shared_state(None) as shared:
        assert isinstance(shared.results, MemoryResultStore) and shared.catalog_cache(lambda c: c.name) is None


def key(config: UpstreamConfig) -> str:
    return " ".join([config.command or "", *config.args])


async def test_a_new_replica_lists_the_catalog_another_replica_stored(redis_url: str) -> None:
    config = UpstreamConfig(name="git", command="mcp-server-git", args=["--repository", "."])
    tools = [tool("git_status", "Show the status.", {"path": {"type": "string"}}, ["path"]), tool("git_log")]
    async with open_shared_state(redis_url) as first, anyio.create_task_group() as tg:
        cache = first.catalog_cache(key)
        assert cache is not None
        await tg.start(cache.run)
        assert cache.load(config) is None
        cache.store(config, tools)
        assert cache.load(config) == tools  # at once, from the mirror
        assert first.redis is not None
        with anyio.fail_after(10):
            while not await first.redis.hexists("toolbridge:catalogs", "git"):
                await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    async with open_shared_state(redis_url) as second, anyio.create_task_group() as tg:
        cache = second.catalog_cache(key)
        assert cache is not None
        await tg.start(cache.run)
        assert cache.load(config) == tools
        assert cache.load(config.model_copy(update={"args": ("--repository", "/other")})) is None
        tg.cancel_scope.cancel()


async def test_an_unreachable_or_corrupt_shared_cache_is_a_miss(redis_url: str, caplog: pytest.LogCaptureFixture
                                                                  ) -> None:
    config = UpstreamConfig(name="git", command="mcp-server-git")
    redis = Redis.from_url(redis_url)
    await redis.hset("toolbridge:catalogs", "git", b'{"format": 1, "key": "mcp-server-git", "tools": [{"x": 1}]}')
    cache = RedisCatalogCache(redis, key)
    async with anyio.create_task_group() as tg:
        await tg.start(cache.run)
        assert cache.load(config) is None
        tg.cancel_scope.cancel()
    await redis.aclose()
    down = RedisCatalogCache(Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=2), key)
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(10):
            await tg.start(down.run)
        assert down.load(config) is None
        tg.cancel_scope.cancel()
    assert "invalid" in caplog.text and "unreachable" in caplog.text


async def test_promotions_are_shared_expire_and_a_broken_record_or_server_changes_nothing(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    promotions = SharedPromotions(redis)
    assert await promotions.load('[null, "ide"]') == []
    await promotions.save('[null, "ide"]', ["a__x", "b__y"])
    other = Redis.from_url(redis_url)
    assert await SharedPromotions(other).load('[null, "ide"]') == ["a__x", "b__y"]  # another replica's view
    await other.aclose()
    assert await promotions.load('["alice", "ide"]') == []
    (key,) = await redis.keys("toolbridge:promoted:*")
    assert 0 < await redis.ttl(key) <= 7 * 24 * 3600
    await redis.set(key, b'{"not": "a list"}')
    assert await promotions.load('[null, "ide"]') is None
    await redis.aclose()
    unreachable = Redis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=1)
    gone = SharedPromotions(unreachable)
    assert await gone.load('[null, "ide"]') is None
    await gone.save('[null, "ide"]', ["a__x"])  # logged, not raised
    await unreachable.aclose()
