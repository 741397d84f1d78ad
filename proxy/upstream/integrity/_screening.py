"""Rug-pull detection: a tool whose definition changed after it was trusted is reported, and held
on a pinned server until an operator approves it.

A server seen for the first time (or that listed no tools so far) is trusted as listed (trust on
first use): every tool's fingerprint is recorded as approved. Later, a tool whose fingerprint differs from the approved
one is a change: a WARNING (once, when first seen), a `ToolChange` to `on_change` (the audit
log), and a pending entry in the fingerprint file (shown by `/status`). On a server with
`pin: true` the changed tool is withheld from the registry (a call would reach the upstream's
current tool, so serving the old definition would mislead), and so is a tool that first appears
after the server's first listing; elsewhere a new tool is trusted on first sight and a changed
one is served as listed. `toolbridge approve` makes the pending definitions the approved ones;
`follow` sees the file change and registers what was withheld.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
from mcp import types
from watchfiles import Change

from proxy.config import UpstreamConfig, on_file_changes
from proxy.text import clean
from proxy.upstream.integrity._fingerprints import FingerprintStore, Pending, ServerPrints, fingerprints, now_iso

__all__ = ["ToolChange", "ToolGate"]

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class ToolChange:
    """One definition seen for the first time that differs from the approved one (or has none)."""

    server: str
    tool: str
    kind: Literal["changed", "new"]
    approved: str | None
    fingerprint: str
    held: bool


Republish = Callable[[UpstreamConfig, list[types.Tool]], None]  # register (and cache) a server's tools anew


@dataclass(frozen=True)
class _Listing:
    config: UpstreamConfig
    tools: list[types.Tool]
    prints: dict[str, str]

    @property
    def pinned(self) -> bool:
        return self.config.pin


class ToolGate:
    """Screens each listing against the approved fingerprints; keeps the listings that have pending changes."""

    def __init__(self, store: FingerprintStore, on_change: Callable[[ToolChange], None] | None = None) -> None:
        self.store = store
        self.on_change = on_change  # e.g. the audit log's record of each change
        self._listings: dict[str, _Listing] = {}
        self._announced: set[str] = set()

    async def screen(self, config: UpstreamConfig, tools: list[types.Tool]) -> list[types.Tool]:
        """The tools to register: all of them, less the pending ones on a pinned server.

        Hashing and the file run off the event loop: a server may list thousands of tools.
        """
        listing = _Listing(config, tools, await anyio.to_thread.run_sync(fingerprints, tools))
        admitted, pending = await self._screen(config.name, listing)
        self._keep(config.name, listing, pending)
        return admitted

    def forget(self, server: str) -> None:
        """The server is withdrawn: an approval must not register its tools again."""
        self._listings.pop(server, None)

    async def follow(
        self, republish: Republish, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Apply approvals written to the file (by `toolbridge approve`) until cancelled: each held listing is
        screened again and what is now approved goes to `republish` (the fleet's)."""
        directory = self.store.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        task_status.started()

        def ours(_change: Change, path: str) -> bool:
            return Path(path).name == self.store.path.name

        await on_file_changes([directory], ours, lambda: self._reapply(republish))

    async def _reapply(self, republish: Republish) -> None:
        for server, listing in list(self._listings.items()):
            admitted, pending = await self._screen(server, listing)
            if self._listings.get(server) is not listing:  # withdrawn or listed anew meanwhile
                continue
            self._keep(server, listing, pending)
            republish(listing.config, admitted)

    def _keep(self, server: str, listing: _Listing, pending: dict[str, Pending]) -> None:
        if pending:
            self._listings[server] = listing
        else:
            self._listings.pop(server, None)

    async def _screen(self, server: str, listing: _Listing) -> tuple[list[types.Tool], dict[str, Pending]]:
        """The admitted tools and the pending changes; new changes are reported."""
        fresh, pending = await anyio.to_thread.run_sync(self._record, server, listing.prints, listing.pinned)
        for change in fresh:
            self._report(change)
        if pending and not fresh and server not in self._announced:
            logger.warning("server %s: %d tool definitions await approval (`toolbridge approve %s`)%s",
                           server, len(pending), server, "; withheld meanwhile" if listing.pinned else "")
        self._announced.add(server)
        held = set(pending) if listing.pinned else set()
        return [tool for tool in listing.tools if tool.name not in held], pending

    def _record(self, server: str, prints: dict[str, str], pinned: bool) -> tuple[list[ToolChange], dict[str, Pending]]:
        """Under the file's lock: first-sight records, and the pending changes (the new ones returned apart)."""
        def apply(servers: dict[str, ServerPrints]) -> tuple[list[ToolChange], dict[str, Pending]]:
            entry = servers.get(server)
            if entry is None or not (entry.approved or entry.pending):  # a first listing of nothing trusts nothing
                servers[server] = ServerPrints(approved=dict(prints))
                return [], {}
            fresh: list[ToolChange] = []
            pending: dict[str, Pending] = {}
            for name, value in prints.items():
                approved = entry.approved.get(name)
                if approved == value:
                    continue
                if approved is None and not pinned:
                    entry.approved[name] = value
                    continue
                before = entry.pending.get(name)
                if before is not None and before.fingerprint == value:
                    pending[name] = before
                    continue
                pending[name] = Pending(value, "new" if approved is None else "changed", now_iso())
                fresh.append(ToolChange(server, name, pending[name].kind, approved, value, pinned))
            entry.pending = pending
            return fresh, pending

        return self.store.update(apply)

    def _report(self, change: ToolChange) -> None:
        what = "changed its definition since it was approved" if change.kind == "changed" else "is new"
        then = (f"withheld until `toolbridge approve {change.server} {clean(change.tool)}`" if change.held
                else "served as listed (`pin: true` would withhold it until approved)")
        logger.warning("server %s: tool %s %s (%s); %s", change.server, clean(change.tool), what,
                       change.fingerprint[:19], then)
        if self.on_change is not None:
            try:
                self.on_change(change)
            except Exception:  # an audit log that cannot be written must not stop the listing
                logger.exception("recording a tool definition change failed")
