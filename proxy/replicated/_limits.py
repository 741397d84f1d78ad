"""`limits:` as arithmetic, free of I/O: which buckets a call counts against, whether a bucket has room,
and when a full one has room again. The stores (`_limit_stores`, `_redis_limits`) keep the counts.

A bucket is one limit for one principal or one profile. Its calls per minute are a sliding log: at most
N calls in any 60 seconds, each call's time kept for a minute, so a refused caller can be told exactly
when the oldest call in the way ages out. Its concurrent calls are slots held while a call runs.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from fnmatch import fnmatchcase

from proxy.config import LimitRule

__all__ = ["WINDOW", "Bucket", "Kind", "Usage", "buckets", "principal_label", "window_wait"]

WINDOW = 60.0  # seconds: `calls_per_minute`


class Kind(Enum):
    """What a bucket counts: calls in the last minute, or calls running now."""

    CALLS = "calls"
    HELD = "held"


@dataclass(frozen=True)
class Bucket:
    """One count a call is checked against: `limit`'s `kind` for one principal or profile (`key`)."""

    limit: str
    rule: LimitRule
    key: str
    kind: Kind

    @property
    def allowed(self) -> int:
        allowed = self.rule.calls_per_minute if self.kind is Kind.CALLS else self.rule.concurrent
        assert allowed is not None  # `buckets` makes a bucket only for a number the rule sets
        return allowed

    def allows(self) -> str:
        """What the limit allows, in words: `12 calls per minute per principal on data__echo`."""
        amount = f"{self.allowed} calls per minute" if self.kind is Kind.CALLS else f"{self.allowed} concurrent calls"
        target = (
            f" on {self.rule.tool}"
            if self.rule.tool is not None
            else f" on server {self.rule.server}"
            if self.rule.server is not None
            else ""
        )
        return f"{amount} per {self.rule.per}{target}"


@dataclass(frozen=True)
class Usage:
    """A bucket's count: calls in the last minute, or calls running now."""

    calls: int
    held: int


def matches(rule: LimitRule, server: str, tool: str) -> bool:
    """Whether a call of `tool` (qualified) on `server` counts against `rule`."""
    if rule.server is not None:
        return rule.server == server
    return rule.tool is None or fnmatchcase(tool, rule.tool)


def buckets(
    limits: Mapping[str, LimitRule], *, principal: str, profile: str, server: str, tool: str
) -> tuple[Bucket, ...]:
    """Every bucket a call of `tool` on `server`, for `principal` in `profile`, counts against."""
    found: list[Bucket] = []
    for name, rule in limits.items():
        if not matches(rule, server, tool):
            continue
        key = principal if rule.per == "principal" else profile
        if rule.calls_per_minute is not None:
            found.append(Bucket(name, rule, key, Kind.CALLS))
        if rule.concurrent is not None:
            found.append(Bucket(name, rule, key, Kind.HELD))
    return tuple(found)


def window_wait(stamps: Sequence[float], now: float, allowed: int) -> float:
    """Seconds until one more call fits among `stamps` (ascending call times), 0 when it fits now.

    Calls older than `WINDOW` no longer count; with `allowed` or more left, the one that must age out is
    the `allowed`-th newest (a reload may have lowered the limit below what was already spent).
    """
    counted = len(stamps) - bisect_right(stamps, now - WINDOW)
    if counted < allowed:
        return 0.0
    return stamps[len(stamps) - allowed] + WINDOW - now


def principal_label(principal: str) -> str:
    """How `/status` shows a principal: a user as a digest, since every token holder of an OAuth endpoint
    may read `/status`; the endpoint's one anonymous principal, or the local client, as itself."""
    if principal.startswith("oauth:"):
        return "user:" + hashlib.sha256(principal.encode()).hexdigest()[:12]
    return principal
