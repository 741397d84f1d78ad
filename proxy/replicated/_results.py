"""Large tool results kept for `toolbridge://results/<id>`: in this process (`_redis`: for every replica).

A result link must stay readable from whichever replica the client's next request lands on, and
after the replica that stored it is gone; so behind a load balancer the results live in Redis.
Both stores are bounded: every entry expires after `ttl` seconds, and the in-process store also
drops its oldest entries beyond `max_chars` in total (Redis is bounded by its own `maxmemory`).
Ids are 128 random bits, so a link cannot be guessed; and one that leaks is still no use to anyone
else: each result is stored with its `owner` (a digest of the principal and profile that produced
it, see `downstream._large`), and only a reader with the same owner gets it back.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

__all__ = ["MemoryResultStore", "ResultStore", "StoredResult", "new_result_id"]


@dataclass(frozen=True)
class StoredResult:
    text: str
    owner: str  # who may read it back: travels with the text, to every replica
    mime_type: str = "text/plain"


def new_result_id() -> str:
    return secrets.token_hex(16)


class ResultStore(Protocol):
    """Where large results wait to be read; `get` of an unknown or expired id is None."""

    async def put(self, result: StoredResult) -> str: ...

    async def get(self, result_id: str) -> StoredResult | None: ...


class MemoryResultStore:
    """This process only: oldest first out beyond `max_chars`, each entry gone after `ttl` seconds."""

    def __init__(self, *, ttl: float, max_chars: int) -> None:
        self.ttl = ttl
        self.max_chars = max_chars
        self._entries: OrderedDict[str, tuple[float, StoredResult]] = OrderedDict()
        self._chars = 0

    async def put(self, result: StoredResult) -> str:
        result_id = new_result_id()
        self._entries[result_id] = (time.monotonic() + self.ttl, result)
        self._chars += len(result.text)
        while self._chars > self.max_chars and len(self._entries) > 1:
            self._drop(next(iter(self._entries)))
        return result_id

    async def get(self, result_id: str) -> StoredResult | None:
        entry = self._entries.get(result_id)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            self._drop(result_id)
            return None
        return entry[1]

    def _drop(self, result_id: str) -> None:
        _, result = self._entries.pop(result_id)
        self._chars -= len(result.text)
