"""Acting on changes to config files as they happen (hot reload, approvals written by `toolbridge approve`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
from watchfiles import Change, awatch

__all__ = ["DEBOUNCE_MS", "on_file_changes"]

DEBOUNCE_MS = 250


async def on_file_changes(
    paths: Sequence[Path], keep: Callable[[Change, str], bool], act: Callable[[], Awaitable[None]]
) -> None:
    """Await `act()` after each burst of changes under `paths` (not recursive) that `keep` keeps, until cancelled.

    The watching thread checks a stop event every few ms; without one, a cancellation (every shutdown) would wait
    out watchfiles' 5 s timeout.
    """
    stop = anyio.Event()

    async def stop_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_when_cancelled)
        async for _ in awatch(*paths, watch_filter=keep, debounce=DEBOUNCE_MS, recursive=False, stop_event=stop):
            await act()
