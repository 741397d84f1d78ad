"""Cache hints of lists (`ttlMs`, `cacheScope`, 2026-07-28): each list's own, and how two merge.

A handshake-era list has no hint on the wire: it counts as `ttlMs: 0, private`, the SDK's default,
so it never makes a merged list cacheable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mcp import types

__all__ = ["CacheHint", "ListKind"]

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
