"""The fleet: one supervised connection per configured server, and the registry fed from them.

`Fleet` starts, restarts, parks and routes to each member (`ServerStatus`, `UpstreamState`), lists each server's
tools once at a time into the registry, and keeps each server's last listing on disk (`DiskCatalogCache`).
"""

from proxy.upstream.fleet._availability import Availability
from proxy.upstream.fleet._backoff import next_delay
from proxy.upstream.fleet._disk_cache import DiskCatalogCache, config_key
from proxy.upstream.fleet._fleet import Fleet
from proxy.upstream.fleet._member import ServerStatus, UpstreamState
from proxy.upstream.fleet._settings import FleetSettings

__all__ = [
    "Availability",
    "DiskCatalogCache",
    "Fleet",
    "FleetSettings",
    "ServerStatus",
    "UpstreamState",
    "config_key",
    "next_delay",
]
