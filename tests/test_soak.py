"""The soak's short variant (`bench/soak.py`), run in every test run: 60 s of kills and bursts."""

from __future__ import annotations

import pytest

from bench.soak import soak

pytestmark = pytest.mark.anyio


async def test_a_minute_of_kills_and_bursts_answers_every_call() -> None:
    report = await soak(60)
    print(report.as_dict())
    assert report.calls > 1000 and report.kills >= 10
    assert report.hangs == 0 and report.leaked_processes == 0
    assert report.success_rate >= 0.99, report.failures
