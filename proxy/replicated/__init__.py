"""State replicas share through Redis (or keep in this process without it): large results, cached
catalogs, sessionless clients' promotions, the counts of `limits:`.

The Redis-backed stores are imported on first use (`open_shared_state` with a URL), never at start-up.
"""

from typing import TYPE_CHECKING, Any

from proxy.replicated._limit_stores import LimitStore, MemoryLimitStore, Refusal
from proxy.replicated._limiter import Limits
from proxy.replicated._limits import WINDOW, Bucket, Kind, Usage, buckets, principal_label, window_wait
from proxy.replicated._results import MemoryResultStore, ResultStore, StoredResult
from proxy.replicated._state import RESULT_TTL, CatalogCache, SharedState, open_shared_state

if TYPE_CHECKING:
    from proxy.replicated._redis import RedisCatalogCache, RedisResultStore, SharedPromotions
    from proxy.replicated._redis_limits import RedisLimitStore

__all__ = [
    "RESULT_TTL",
    "WINDOW",
    "Bucket",
    "CatalogCache",
    "Kind",
    "LimitStore",
    "Limits",
    "MemoryLimitStore",
    "MemoryResultStore",
    "RedisCatalogCache",
    "RedisLimitStore",
    "RedisResultStore",
    "Refusal",
    "ResultStore",
    "SharedPromotions",
    "SharedState",
    "StoredResult",
    "Usage",
    "buckets",
    "open_shared_state",
    "principal_label",
    "window_wait",
]


def __getattr__(name: str) -> Any:
    if name in ("RedisCatalogCache", "RedisResultStore", "SharedPromotions"):
        from proxy.replicated import _redis

        return getattr(_redis, name)
    if name == "RedisLimitStore":
        from proxy.replicated import _redis_limits

        return _redis_limits.RedisLimitStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
