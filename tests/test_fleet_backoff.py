"""The reconnect delay: doubling from 1 s, capped at 60 s, jitter only ever shortening it."""

from __future__ import annotations

import pytest

from proxy.upstream import next_delay


@pytest.mark.parametrize(("attempt", "expected"), [(0, 1), (1, 2), (2, 4), (5, 32), (6, 60), (7, 60), (500, 60)])
def test_delay_doubles_up_to_the_cap_without_jitter(attempt: int, expected: float) -> None:
    assert next_delay(attempt, rand=lambda: 0.0) == expected


@pytest.mark.parametrize("attempt", [0, 3, 10])
def test_jitter_shortens_by_at_most_a_fifth(attempt: int) -> None:
    full = next_delay(attempt, rand=lambda: 0.0)
    assert next_delay(attempt, rand=lambda: 1.0) == pytest.approx(full * 0.8)
    assert full * 0.8 <= next_delay(attempt) <= full


def test_negative_attempt_is_rejected() -> None:
    with pytest.raises(ValueError, match="attempt"):
        next_delay(-1)
