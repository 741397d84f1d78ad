"""`Limits`: the `limits:` of `toolsets.yaml` applied to each call that reaches an upstream tool.

A call takes room in every bucket it counts against before the upstream is asked, or is refused with
`LimitReached` and asks nothing; its concurrency slots are given back however it ends (a result, an
error, a cancellation, a dropped connection). Hot reload swaps the rules (`update`); counts are kept
per limit name, so an edited limit keeps what its callers already spent.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio

from proxy.config import LimitRule
from proxy.errors import LimitReached
from proxy.replicated._limit_stores import LimitStore, MemoryLimitStore
from proxy.replicated._limits import Bucket, Kind, buckets, principal_label

__all__ = ["Limits"]

MAX_REPORTED = 100  # principals shown per limit in `/status`: a team endpoint may have thousands
RELEASE_TIMEOUT = 5.0  # a release that cannot reach the store gives up; a Redis lease then expires by itself


class Limits:
    """Rules and the store that counts them; `refused` counts refusals per limit (for `/metrics`)."""

    def __init__(self, rules: Mapping[str, LimitRule], store: LimitStore | None = None) -> None:
        self.rules = dict(rules)
        self.store: LimitStore = store or MemoryLimitStore()
        self.refused: Counter[str] = Counter()
        self._running: dict[str, tuple[Bucket, ...]] = {}  # each running call's slots, by lease

    def update(self, rules: Mapping[str, LimitRule]) -> None:
        self.rules = dict(rules)

    @asynccontextmanager
    async def hold(self, *, principal: str, profile: str, server: str, tool: str) -> AsyncIterator[None]:
        """Room for one call of `tool` (qualified) on `server` for `principal` in `profile`, for the body.

        Raises:
            LimitReached: a bucket is full; nothing was taken from any other.
        """
        matched = buckets(self.rules, principal=principal, profile=profile, server=server, tool=tool)
        if not matched:
            yield
            return
        lease = secrets.token_hex(12)
        refusal = await self.store.acquire(matched, lease)
        if refusal is not None:
            self.refused[refusal.bucket.limit] += 1
            raise LimitReached(refusal.bucket.limit, refusal.bucket.allows(), refusal.retry_after)
        held = tuple(bucket for bucket in matched if bucket.kind is Kind.HELD)
        if not held:
            yield
            return
        self._running[lease] = held
        try:
            yield
        finally:
            del self._running[lease]
            with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_TIMEOUT):
                await self.store.release(held, lease)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep running calls' slots from expiring (a store whose slots are leases) until cancelled."""
        task_status.started()
        if self.store.lease_seconds is None:
            return
        while True:
            await anyio.sleep(self.store.lease_seconds / 3)
            for lease, held in list(self._running.items()):
                await self.store.renew(held, lease)

    def report(self) -> list[dict[str, Any]]:
        """Each limit with its refusals and the usage of the principals or profiles it counts, busiest first
        and at most `MAX_REPORTED` of them (`/status`; `counted` says how many there are)."""
        usage = self.store.usage()
        report = []
        for name, rule in self.rules.items():
            counted = sorted(
                ((key, used) for (limit, key), used in usage.items() if limit == name),
                key=lambda item: (-item[1].held, -item[1].calls, item[0]),
            )
            shown = [
                {
                    "key": principal_label(key) if rule.per == "principal" else key,
                    "calls_last_minute": used.calls,
                    "concurrent": used.held,
                }
                for key, used in counted[:MAX_REPORTED]
            ]
            report.append(
                {
                    "limit": name,
                    "per": rule.per,
                    "server": rule.server,
                    "tool": rule.tool,
                    "calls_per_minute": rule.calls_per_minute,
                    "concurrent": rule.concurrent,
                    "refused": self.refused[name],
                    "counted": len(counted),
                    "usage": shown,
                }
            )
        return report
