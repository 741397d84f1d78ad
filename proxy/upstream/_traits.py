"""What an upstream's answers say about how to carry them: the extensions it advertises, and the cache
hints (`ttlMs`, `cacheScope`, 2026-07-28) of its lists.

Each is recorded per server (`ServerTraits`) and merged per session: `merge_extensions` keeps the
extensions toolbridge carries (`CARRIED`, the one list to extend when toolbridge learns another),
`CacheHint.merge` the most cautious hint. A handshake-era list has no hint on the wire: it counts
as `ttlMs: 0, private`, the SDK's default, so it never makes a merged list cacheable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp import types
from mcp.client.extension import ClientExtension, advertise

from proxy.upstream._apps import APP_MIME_TYPE, UI_EXTENSION

__all__ = ["CARRIED", "CacheHint", "ListKind", "ServerTraits", "client_extensions", "merge_extensions"]

CARRIED: frozenset[str] = frozenset({UI_EXTENSION})
"""The extensions toolbridge carries through: advertised downstream when a server in scope does."""


def client_extensions() -> list[ClientExtension]:
    """What toolbridge declares to every upstream: MCP Apps, so a server that offers its UI only to hosts
    that render it (`client_supports_apps`) offers it; a host that renders none still gets its text."""
    return [advertise(UI_EXTENSION, {"mimeTypes": [APP_MIME_TYPE]})]

ListKind = Literal["tools", "resources", "templates", "prompts"]


@dataclass(frozen=True)
class CacheHint:
    """How long a list may be cached (ms), and whether only for the one who asked (`private`)."""

    ttl_ms: int = 0
    private: bool = True

    @classmethod
    def of(cls, result: types.CacheableResult) -> CacheHint:
        return cls(max(0, result.ttl_ms), result.cache_scope != "public")

    def merge(self, other: CacheHint) -> CacheHint:
        """The hint of a list made of both: the shorter life, private if either is."""
        return CacheHint(min(self.ttl_ms, other.ttl_ms), self.private or other.private)

    @property
    def fields(self) -> dict[str, Any]:
        """As a list result's `ttl_ms` and `cache_scope`."""
        return {"ttl_ms": self.ttl_ms, "cache_scope": "private" if self.private else "public"}


@dataclass(frozen=True)
class ServerTraits:
    """One server's advertised extensions (identifier → settings) and its lists' cache hints."""

    extensions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hints: Mapping[ListKind, CacheHint] = field(default_factory=dict)

    def hint(self, kind: ListKind) -> CacheHint:
        return self.hints.get(kind, CacheHint())


def merge_extensions(advertised: Iterable[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The carried extensions any of `advertised` names, with settings merged key by key: the first
    value met wins (pass them in server-name order), lists are united, and settings that are not an
    object count as none."""
    merged: dict[str, dict[str, Any]] = {}
    for extensions in advertised:
        for identifier in sorted(CARRIED.intersection(extensions)):
            settings = extensions[identifier]
            into = merged.setdefault(identifier, {})
            for key, value in (settings.items() if isinstance(settings, Mapping) else ()):
                if key not in into:
                    into[key] = list(value) if isinstance(value, list) else value
                elif isinstance(into[key], list) and isinstance(value, list):
                    into[key] += [item for item in value if item not in into[key]]
    return merged
