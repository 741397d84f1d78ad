"""Promotion: deferred tools a session has used or pinned become direct tools of it (`promote: N`).

A handshake-era session promotes what it calls or describes. A 2026-era list depends only on the
profile and the principal (SEP-2567), so there only an explicit pin (`tool_describe` with
`pin: true`) promotes, and `pin: false` takes a tool back. Kept per session or principal, least
recently used first; which of them are listed (at most N, within the
budget) is decided by `Views.promotable` each time the session's list is computed, so tools that
left the catalog leave the promoted set and re-registered ones stay. A sessionless client's record is
shared with the other replicas when they share a Redis (`Promoter`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

import anyio

from proxy.downstream.session import Owner
from proxy.views import SessionView, Views

if TYPE_CHECKING:
    from proxy.replicated import SharedPromotions  # Redis is imported only when a URL is given

__all__ = ["Promoter", "Promotions"]

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


class Promoter:
    """Which deferred tools a session gets listed directly, and the record of what it used, kept in step with
    other replicas for a sessionless client."""

    def __init__(self, views: Views, shared: SharedPromotions | None = None) -> None:
        self.views = views
        self.shared = shared
        self.promotions = Promotions()
        self.generation = 0  # bumped each time some session's promoted tools changed
        self._changed = anyio.Event()

    async def wait_changed(self, since: int) -> None:
        """Return once some session's promoted tools changed after generation `since`."""
        while self.generation <= since:
            await self._changed.wait()

    def promoted(self, session: Hashable | None, view: SessionView) -> tuple[str, ...]:
        """The deferred tools this session used and now gets listed directly (`promote: N`)."""
        if session is None or not view.promote:
            return ()
        return self.views.promotable(view, self.promotions.used(session))

    def tools_fingerprint(self, session: Hashable, view: SessionView) -> str:
        return self.views.session_surface(view, self.promoted(session, view))[1]

    async def load(self, session: Hashable | None, view: SessionView) -> None:
        """A sessionless client may have been promoted tools through another replica: take that record."""
        if isinstance(session, Owner) and view.promote and self.shared is not None:
            names = await self.shared.load(session.label)
            if names is not None:
                self.promotions.replace(session, names)

    async def use(
        self, session: Hashable | None, view: SessionView, names: Iterable[str], *, keep: bool = True
    ) -> None:
        """The session used or pinned these tools (`keep=False`: unpinned them): promote the deferred
        ones, or take them back, and tell it if its list changed."""
        used = [name for name in names if name in view.deferred]
        if session is None or not view.promote or not used:
            return
        await self.load(session, view)  # what other replicas recorded is kept, not overwritten
        before = list(self.promotions.used(session))
        for name in used:
            if keep:
                self.promotions.use(session, name)
            else:
                self.promotions.drop(session, name)
        if self.promotions.used(session) == before:
            return  # e.g. the latest promoted tool called again: nothing to tell or to share
        self.generation += 1
        self._changed.set()
        self._changed = anyio.Event()
        if isinstance(session, Owner) and self.shared is not None:
            await self.shared.save(session.label, self.promotions.used(session))

    def forget(self, session: Hashable) -> None:
        self.promotions.forget(session)
