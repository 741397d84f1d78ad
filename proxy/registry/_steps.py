"""Work done a step at a time: run to the end at once, or sliced so the event loop serves others meanwhile.

Registering thousands of tools (and indexing them, `views`) is such work: at once where nothing waits on the
loop, sliced where every other upstream's calls do.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import TypeVar

import anyio
import anyio.lowlevel

SLICE_SECONDS = 0.02  # per-tool work between two yields to the loop, in `set_server_tools_sliced`
T = TypeVar("T")
Steps = Generator[None, None, T]  # work done a step at a time; its result is the generator's return value


def run_steps(steps: Steps[T]) -> T:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


async def run_sliced(steps: Steps[T]) -> T:
    """`steps` run to the end, yielding to the loop every `SLICE_SECONDS` of them."""
    since = time.perf_counter()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        if time.perf_counter() - since > SLICE_SECONDS:
            await anyio.lowlevel.checkpoint()
            since = time.perf_counter()
