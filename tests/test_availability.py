"""Availability (SPEC §4): a 30 s cache over the fleet's truth, and a 60 s grace for flakes."""

from __future__ import annotations

import logging

import pytest

from proxy.upstream import Availability


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Upstreams:
    """A scripted `check`: the truth per server, with a count of how often it was asked."""

    def __init__(self, **up: bool) -> None:
        self.up = dict(up)
        self.asked: list[str] = []

    def __call__(self, server: str) -> bool:
        self.asked.append(server)
        return self.up.get(server, False)


def availability(**up: bool) -> tuple[Availability, Upstreams, Clock]:
    check, clock = Upstreams(**up), Clock()
    return Availability(check, clock=clock), check, clock


def test_answers_are_cached_for_30_seconds() -> None:
    available, check, clock = availability(s=True)
    assert available("s")
    check.up["s"] = False
    clock.now += 29.9
    assert available("s")
    assert check.asked == ["s"]
    clock.now += 0.1  # exactly 30 s: the cache has expired
    assert available("s")  # a flake now: within 60 s of the last success
    assert check.asked == ["s", "s"]


def test_a_failure_within_60_seconds_of_the_last_success_is_a_flake(caplog: pytest.LogCaptureFixture) -> None:
    available, check, clock = availability(s=True)
    assert available("s")
    check.up["s"] = False
    clock.now += 31
    with caplog.at_level(logging.WARNING, logger="proxy.registry"):
        assert available("s")
        clock.now += 1
        assert available("s")  # nothing was cached: asked again, still a flake
        clock.now += 27.9  # 59.9 s after the last success
        assert available("s")
    assert check.asked == ["s", "s", "s", "s"]
    assert caplog.records == []


def test_a_failure_after_the_grace_is_recorded_cached_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    available, check, clock = availability(s=True)
    assert available("s")
    check.up["s"] = False
    clock.now += 60
    with caplog.at_level(logging.WARNING, logger="proxy.registry"):
        assert not available("s")
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "s" in caplog.records[0].getMessage()
    check.up["s"] = True
    clock.now += 29
    assert not available("s")  # the failure is cached
    assert check.asked == ["s", "s"]
    clock.now += 1
    assert available("s")


def test_a_server_never_seen_up_is_unavailable_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    available, check, clock = availability()
    with caplog.at_level(logging.WARNING, logger="proxy.registry"):
        assert not available("down")
        clock.now += 31
        assert not available("down")  # asked again, still down: not logged again
    assert check.asked == ["down", "down"]
    assert len(caplog.records) == 1


def test_the_grace_counts_from_the_last_success_not_the_first() -> None:
    available, check, clock = availability(s=True)
    assert available("s")
    clock.now += 50
    assert available("s")  # cache expired, asked, success at t=50
    check.up["s"] = False
    clock.now += 40  # 90 s after the first success, 40 after the last
    assert available("s")


def test_forget_drops_the_cached_answer() -> None:
    available, check, clock = availability(s=True)
    assert available("s")
    check.up["s"] = False
    available.forget("s")
    assert available("s")  # asked again: a flake (the last success was just now)
    assert check.asked == ["s", "s"]
    clock.now += 61
    assert not available("s")
    check.up["s"] = True
    available.forget("s")
    assert available("s")
    available.forget("never-seen")  # no error


def test_servers_are_independent() -> None:
    available, _, _ = availability(up=True, down=False)
    assert available("up")
    assert not available("down")
    assert [s for s in ("up", "down", "other") if not available(s)] == ["down", "other"]


def test_defaults_are_30_and_60_seconds() -> None:
    available = Availability(lambda server: True)
    assert (available.ttl, available.grace) == (30.0, 60.0)
