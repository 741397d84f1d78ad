"""State replicas share through Redis (or keep in this process without it): large results, cached
catalogs, sessionless clients' promotions."""

from proxy.shared._catalogs import CatalogCache, RedisCatalogCache
from proxy.shared._promotions import SharedPromotions
from proxy.shared._results import MemoryResultStore, RedisResultStore, ResultStore, StoredResult
from proxy.shared._state import RESULT_TTL, SharedState, open_shared_state

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
