"""How the fleet runs its members: where children run and log, the era it asks for, and its timings and limits.

One frozen object, built once (`app.py` from the config), handed to the `Fleet` and by it to the `Supervisor`,
so the two never relay a dozen loose parameters to each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from proxy.upstream.connection import KEEPALIVE_TIMEOUT
from proxy.upstream.oauth import LOGIN_POLL

__all__ = ["KEEPALIVE_INTERVAL", "PARK_AFTER_FAILURES", "REPROBE_INTERVAL", "FleetSettings"]

KEEPALIVE_INTERVAL = 30.0  # the fleet's defaults, in seconds and failures
PARK_AFTER_FAILURES = 5
REPROBE_INTERVAL = 300.0


@dataclass(frozen=True)
class FleetSettings:
    """`config_dir`: where stdio children run by default; `log_dir`: their stderr logs. `mode`: the protocol era
    asked of servers that do not pin one. `keepalive`/`keepalive_timeout`: how often a quiet connection is checked
    and how long the check may take. `park_after` failures in a row park a server, re-probed every `reprobe` s. A
    server gone for `grace` s leaves the catalog. `lazy`/`idle_timeout`: stdio servers started on first use and
    stopped when idle. `spawn_concurrency`: children started at once (default 4 a core). `login_poll`: how often a
    server waiting for OAuth consent looks for a login."""

    config_dir: Path
    log_dir: Path
    mode: str = "auto"
    keepalive: float = KEEPALIVE_INTERVAL
    keepalive_timeout: float = KEEPALIVE_TIMEOUT
    park_after: int = PARK_AFTER_FAILURES
    reprobe: float = REPROBE_INTERVAL
    grace: float = 60.0
    lazy: bool = False
    idle_timeout: float | None = None
    spawn_concurrency: int | None = None
    login_poll: float = LOGIN_POLL
