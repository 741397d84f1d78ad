"""The upstream wing: the fleet of MCP client connections, one per configured server.

Only `app`, `cli` and `ops` know it. `Fleet` keeps every upstream connected and routes to it (`fleet`), over
one `Connection` each (`connection`), with consent and tokens for OAuth servers (`oauth`) and each listing
screened against the approved fingerprints (`integrity`).
"""

from proxy.upstream.connection import InFlight, client_callbacks, connect, filter_tools, resolve_command
from proxy.upstream.fleet import (
    Availability,
    DiskCatalogCache,
    Fleet,
    FleetSettings,
    ServerStatus,
    UpstreamState,
    config_key,
    next_delay,
)
from proxy.upstream.integrity import FingerprintStore, ToolChange, ToolGate, fingerprint
from proxy.upstream.oauth import login, token_store

__all__ = [
    "Availability",
    "DiskCatalogCache",
    "FingerprintStore",
    "Fleet",
    "FleetSettings",
    "InFlight",
    "ServerStatus",
    "ToolChange",
    "ToolGate",
    "UpstreamState",
    "client_callbacks",
    "config_key",
    "connect",
    "filter_tools",
    "fingerprint",
    "login",
    "next_delay",
    "resolve_command",
    "token_store",
]
