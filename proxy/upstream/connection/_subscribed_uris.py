"""The resource URIs of one server that downstream sessions subscribed to, with a generation that counts
its changes, so whoever applies them (a listen stream's filter, subscribe requests) can tell when it caught up."""

from __future__ import annotations

from collections.abc import Iterable

import anyio


class SubscribedUris:
    """Upstream URIs with at least one downstream subscriber; `generation` counts the changes."""

    def __init__(self) -> None:
        self._uris: set[str] = set()
        self.generation = 0
        self._applied = -1
        self._changed = anyio.Event()

    def add(self, uris: Iterable[str]) -> None:
        new = set(uris) - self._uris
        if new:
            self._uris |= new
            self._bump()

    def remove(self, uri: str) -> None:
        if uri in self._uris:
            self._uris.remove(uri)
            self._bump()

    def sorted(self) -> list[str]:
        return sorted(self._uris)

    def _bump(self) -> None:
        self.generation += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_changed(self, since: int) -> None:
        """Return once the set changed after `generation` was `since`."""
        while self.generation == since:
            await self._changed.wait()

    def mark_applied(self, generation: int) -> None:
        """The live connection asked for the set as it was at `generation`."""
        if generation > self._applied:
            self._applied = generation
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_applied(self, generation: int) -> None:
        """Return once the live connection asked for the set as of `generation` (bound it with a timeout)."""
        while self._applied < generation:
            await self._changed.wait()
