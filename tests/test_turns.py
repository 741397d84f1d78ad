"""The fleet's listings take turns, and a turn held too long never stops the others."""

from __future__ import annotations

import anyio
import pytest

from proxy.upstream.fleet._listing_turns import Turns

pytestmark = pytest.mark.anyio


async def test_turns_come_one_at_a_time() -> None:
    turns = Turns(patience=60)
    order: list[str] = []
    first_in, release = anyio.Event(), anyio.Event()

    async def first() -> None:
        async with turns.turn():
            order.append("first in")
            first_in.set()
            await release.wait()
            order.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with turns.turn():
            order.append("second in")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            tg.start_soon(second)
            await first_in.wait()
            await anyio.wait_all_tasks_blocked()
            assert order == ["first in"]  # the second waits for its turn
            release.set()
    assert order == ["first in", "first out", "second in"]


async def test_a_turn_held_past_patience_lets_the_next_go_ahead() -> None:
    turns = Turns(patience=0.05)
    held = anyio.Event()

    async def hanging() -> None:
        async with turns.turn():
            held.set()
            await anyio.sleep_forever()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hanging)
            await held.wait()
            for _ in range(2):  # each goes ahead after waiting `patience` (fail_after fails a wait for the turn)
                async with turns.turn():
                    pass
            tg.cancel_scope.cancel()
