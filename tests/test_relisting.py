"""The re-listing budget of one server: a burst after a quiet spell, then one re-listing per interval."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.upstream.fleet._relisting import RelistBudget


def test_a_quiet_server_is_relisted_at_once_for_a_few_changes_in_a_row() -> None:
    budget = RelistBudget(burst=3, interval=1.0, now=0.0)
    for moment in (10.0, 10.1, 10.2):
        assert budget.next_at(moment) == moment
        budget.spend(moment)
    assert budget.next_at(10.3) == 11.0  # the burst is spent: one a second from here


def test_the_listing_on_connect_counts() -> None:
    budget = RelistBudget(burst=3, interval=1.0, now=0.0)
    budget.spend(0.0)
    budget.spend(0.0)
    assert budget.next_at(0.0) == 0.0
    budget.spend(0.0)
    assert budget.next_at(0.0) == 1.0


def test_the_burst_refills_one_per_interval_and_no_further() -> None:
    budget = RelistBudget(burst=2, interval=1.0, now=0.0)
    budget.spend(0.0)
    budget.spend(0.0)
    assert budget.next_at(0.5) == 1.0
    assert budget.next_at(100.0) == 100.0
    budget.spend(100.0)
    budget.spend(100.0)
    assert budget.next_at(100.0) == 101.0  # a long quiet spell saved no more than the burst


def test_an_interval_of_zero_limits_nothing() -> None:
    budget = RelistBudget(burst=1, interval=0.0, now=0.0)
    for _ in range(5):
        assert budget.next_at(1.0) == 1.0
        budget.spend(1.0)


@given(st.lists(st.floats(min_value=0, max_value=5), min_size=1, max_size=60))
def test_a_storm_is_relisted_no_faster_than_one_per_interval_beyond_the_burst(gaps: list[float]) -> None:
    """Whatever the changes' timing, re-listing as soon as allowed: in any window of T seconds, at most
    burst + T / interval re-listings."""
    burst, interval = 3, 1.0
    budget, now, listed = RelistBudget(burst=burst, interval=interval, now=0.0), 0.0, []
    for gap in gaps:
        now = max(now + gap, budget.next_at(now + gap))
        budget.spend(now)
        listed.append(now)
    for first, start in enumerate(listed):
        for last in range(first, len(listed)):
            assert last - first + 1 <= burst + (listed[last] - start) / interval + 1e-9
