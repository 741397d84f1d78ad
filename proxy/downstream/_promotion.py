"""Promotion: deferred tools a session has used or pinned become direct tools of it (`promote: N`).

A handshake-era session promotes what it calls or describes. A 2026-era list depends only on the
profile and the principal (SEP-2567), so there only an explicit pin (`tool_describe` with
`pin: true`) promotes, and `pin: false` takes a tool back. Kept per session or principal, least
recently used first; which of them are listed (at most N, within the
budget) is decided by `Views.promotable` each time the session's list is computed, so tools that
left the catalog leave the promoted set and re-registered ones stay.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

__all__ = ["Promotions"]

_MAX_SESSIONS = 4096
_MAX_REMEMBERED = 64  # per session; a profile promotes at most 64


class Promotions:
    """The deferred tools each session used, least recently used first."""

    def __init__(self) -> None:
        self._used: OrderedDict[Hashable, list[str]] = OrderedDict()

    def use(self, session: Hashable, name: str) -> None:
        used = self._used.setdefault(session, [])
        if name in used:
            used.remove(name)
        used.append(name)
        self.replace(session, used)

    def drop(self, session: Hashable, name: str) -> None:
        used = self._used.get(session)
        if used is not None and name in used:
            used.remove(name)

    def replace(self, session: Hashable, names: list[str]) -> None:
        """Set what `session` used (for a sessionless client: what every replica recorded)."""
        self._used[session] = names[-_MAX_REMEMBERED:]
        self._used.move_to_end(session)
        while len(self._used) > _MAX_SESSIONS:
            self._used.popitem(last=False)

    def used(self, session: Hashable) -> list[str]:
        return self._used.get(session, [])

    def forget(self, session: Hashable) -> None:
        self._used.pop(session, None)
