"""Reconnect delays: exponential backoff with jitter, as a pure function so it can be tested."""

from __future__ import annotations

import random
from collections.abc import Callable

BASE_DELAY = 1.0
MAX_DELAY = 60.0
JITTER = 0.2


def next_delay(
    attempt: int,
    *,
    base: float = BASE_DELAY,
    cap: float = MAX_DELAY,
    jitter: float = JITTER,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait before reconnect attempt `attempt` (0 for the first retry).

    The delay doubles from `base` up to `cap`; jitter only ever shortens it (by up to `jitter`
    of itself), so the cap is a true upper bound and many servers that failed together do not
    retry in lockstep.
    """
    if attempt < 0:
        raise ValueError("attempt must be >= 0")
    exponent = min(attempt, 32)  # 2**32 s is far past any cap; keeps the float finite
    delay = min(cap, base * 2.0**exponent)
    return delay * (1.0 - jitter * rand())
