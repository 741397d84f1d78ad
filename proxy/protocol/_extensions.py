"""The extensions a server advertises, and which of them toolbridge carries through.

Each server's are recorded with its lists' cache hints (`ServerTraits`) and merged per session:
`merge_extensions` keeps the extensions toolbridge carries (`CARRIED`, the one list to extend when
toolbridge learns another), `CacheHint.merge` the most cautious hint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.client.extension import ClientExtension, advertise

from proxy.protocol._apps import APP_MIME_TYPE, UI_EXTENSION
from proxy.protocol._cache_hints import CacheHint, ListKind

__all__ = ["CARRIED", "ServerTraits", "client_extensions", "merge_extensions"]

CARRIED: frozenset[str] = frozenset({UI_EXTENSION})
"""The extensions toolbridge carries through: advertised downstream when a server in scope does."""


def client_extensions() -> list[ClientExtension]:
    """What toolbridge declares to every upstream: MCP Apps, so a server that offers its UI only to hosts
    that render it (`client_supports_apps`) offers it; a host that renders none still gets its text."""
    return [advertise(UI_EXTENSION, {"mimeTypes": [APP_MIME_TYPE]})]



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
