"""State replicas share through Redis (or keep in this process without it): large results, cached
catalogs, sessionless clients' promotions.

The Redis-backed stores are imported on first use (`open_shared_state` with a URL), never at start-up.
"""

from typing import TYPE_CHECKING, Any

from proxy.replicated._results import MemoryResultStore, ResultStore, StoredResult
from proxy.replicated._state import RESULT_TTL, CatalogCache, SharedState, open_shared_state

if TYPE_CHECKING:
    from proxy.replicated._redis import RedisCatalogCache, RedisResultStore, SharedPromotions

__all__ = [
    "RESULT_TTL",
    "CatalogCache",
    "MemoryResultStore",
    "RedisCatalogCache",
    "RedisResultStore",
    "ResultStore",
    "SharedPromotions",
    "SharedState",
    "StoredResult",
    "open_shared_state",
]


def __getattr__(name: str) -> Any:
    if name in ("RedisCatalogCache", "RedisResultStore", "SharedPromotions"):
        from proxy.replicated import _redis

        return getattr(_redis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
