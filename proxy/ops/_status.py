"""`GET /status`: the running proxy as an operator needs to see it, all text redacted, and every
text an upstream could have put there escaped (in the report, and again in the tables printed from
a report that may come from another proxy's `/status`)."""

from __future__ import annotations

import datetime
from typing import Any

from proxy.catalogs import qualified_uri
from proxy.config import Config
from proxy.errors import redact
from proxy.replicated import Limits
from proxy.text import clean, escape
from proxy.upstream import FingerprintStore, Fleet
from proxy.views import Views

__all__ = ["status_report"]

MAX_LISTED = 100  # of shadowed URIs and of tool changes: a hostile server may make thousands


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat(timespec="seconds")


def _tool_changes(config: Config, store: FingerprintStore) -> list[dict[str, Any]]:
    """Definitions awaiting `toolbridge approve`, withheld where the server is pinned."""
    changes = [
        {"server": server, "tool": clean(tool), "kind": pending.kind, "seen": pending.seen,
         "fingerprint": pending.fingerprint,
         "held": server in config.upstreams and config.upstreams[server].pin}
        for server, entry in sorted(store.load().items())
        for tool, pending in sorted(entry.pending.items())
    ]
    return changes[:MAX_LISTED]


def status_report(config: Config, fleet: Fleet, views: Views, store: FingerprintStore, limits: Limits
                  ) -> dict[str, Any]:
    upstreams = [
        {
            "server": s.name,
            "state": s.state.value,
            "transport": s.transport,
            "protocol_version": s.protocol_version,
            "tools": s.tools,
            "reason": escape(redact(s.reason)),
            "last_error": escape(redact(s.last_error)) if s.last_error else None,
            "restarts": s.restarts,
            "connected_since": _iso(s.connected_since),
        }
        for s in fleet.status()
    ]
    profiles = {}
    for name in sorted(views.toolsets.profiles):
        view = views.for_profile(name)
        surface = view.surface
        profiles[name] = {
            "tier": surface.tier,
            "form": surface.form,
            "budget": surface.budget,
            "listing_tokens": surface.listing_tokens,
            "context_tokens": view.context_tokens,
            "core_tools": len(view.core),
            "deferred_tools": surface.deferred_count,
        }
    shadowed = views.catalogs.shadowed()
    return {
        "upstreams": upstreams,
        "profiles": profiles,
        "shadowed_uris": [
            {"uri": clean(e.uri), "kind": e.kind, "servers": list(e.servers),
             "reachable_as": [clean(qualified_uri(server, e.uri)) for server in e.servers]}
            for e in shadowed[:MAX_LISTED]
        ],
        "shadowed_uris_total": len(shadowed),
        "tool_changes": _tool_changes(config, store),
        "limits": limits.report(),
        "config_problems": [str(problem) for problem in config.problems],
        "config_warnings": [redact(warning) for warning in config.warnings],
    }


UPSTREAM_COLUMNS = ("server", "state", "transport", "protocol", "tools", "restarts", "connected since", "last error")
PROFILE_COLUMNS = ("profile", "tier", "form", "budget", "listing tokens", "core", "deferred")


def status_rows(report: dict[str, Any]) -> tuple[list[list[str]], list[list[str]]]:
    """The report as two tables of text (upstreams, profiles), for `toolbridge status`; every cell escaped."""
    upstreams = [
        [u["server"], u["state"], u["transport"], u["protocol_version"] or "-", str(u["tools"]), str(u["restarts"]),
         u["connected_since"] or "-", u["last_error"] or ""]
        for u in report["upstreams"]
    ]
    profiles = [
        [name, p["tier"], p["form"], str(p["budget"]), str(p["listing_tokens"]), str(p["core_tools"]),
         str(p["deferred_tools"])]
        for name, p in report["profiles"].items()
    ]
    return _escaped(upstreams), _escaped(profiles)


def _escaped(rows: list[list[str]]) -> list[list[str]]:
    return [[escape(cell) for cell in row] for row in rows]


def plain_table(columns: tuple[str, ...], rows: list[list[str]]) -> str:
    """Columns aligned with spaces, no colour: for pipes, files and logs."""
    widths = [max(len(cell) for cell in column) for column in zip(columns, *rows, strict=True)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in (list(columns), *rows)]
    return "\n".join(lines)
