"""An upstream flooding its way back to a slow downstream client: progress, logs and requests stay bounded."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from inprocess import tool
from mcp import types

from proxy.app import NOTICE_BUFFER, _dropping_when_full
from proxy.config import ToolsetsConfig
from proxy.downstream.rounds import _session_channel as _channels
from proxy.downstream.rounds._session_channel import MAX_WAITING, LatestProgress, Relaying
from proxy.downstream.rounds._session_logs import MAX_DELIVERING, SessionLogs
from proxy.downstream.session._identity import LOCAL_PRINCIPAL, Caller
from proxy.protocol import Notice
from proxy.registry import Registry
from proxy.upstream import InFlight
from proxy.upstream.connection._relay import MAX_PENDING_LOGS
from proxy.views import Views

pytestmark = pytest.mark.anyio

MESSAGE = types.LoggingMessageNotificationParams(level="info", data="x" * 200)


async def test_progress_to_a_slow_client_keeps_only_the_latest_value() -> None:
    sent: list[float] = []
    gate = anyio.Event()

    async def report(value: float, total: float | None, message: str | None) -> None:
        sent.append(value)
        await gate.wait()

    progress = LatestProgress(report)
    async with anyio.create_task_group() as tg:
        tg.start_soon(progress, 0.0, 1000.0, None)
        await anyio.wait_all_tasks_blocked()
        assert sent == [0.0]
        with anyio.fail_after(5):  # none of these waits for the client
            for value in range(1, 1001):
                await progress(float(value), 1000.0, None)
        gate.set()
    assert sent == [0.0, 1000.0]


class SlowChannel:
    """A back channel whose client reads nothing until `gate` is set."""

    session = "slow"

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.logged = 0

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        await self.gate.wait()
        self.logged += 1


async def test_a_calls_log_messages_beyond_the_bound_are_dropped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    in_flight, channel = InFlight(), SlowChannel()

    async def unclaimed(server: str, notification: types.ServerNotification) -> None:
        raise AssertionError("a message of a call in flight reached the notice sink")

    with caplog.at_level(logging.WARNING):
        async with in_flight.call(channel), anyio.create_task_group() as tg:  # type: ignore[arg-type]
            for _ in range(MAX_PENDING_LOGS + 36):
                tg.start_soon(in_flight.log, "s", MESSAGE, unclaimed)
            await anyio.wait_all_tasks_blocked()
            channel.gate.set()
    assert channel.logged == MAX_PENDING_LOGS
    assert "dropped 36 log messages" in caplog.text


async def test_messages_no_call_claimed_are_delivered_a_bounded_number_at_a_time() -> None:
    registry = Registry()
    registry.set_server_tools("s", [tool("ping")])
    logs = SessionLogs(Views(registry, ToolsetsConfig(), lambda server: True),
                       SimpleNamespace(logs=lambda server: False))  # type: ignore[arg-type]
    gate, delivered = anyio.Event(), []

    async def send(notification: types.LoggingMessageNotification) -> None:
        await gate.wait()
        delivered.append(notification)

    await logs.set_level(SimpleNamespace(request=None, session=SimpleNamespace(send_notification=send)),  # type: ignore[arg-type]
                         Caller(LOCAL_PRINCIPAL, "session"), "default", "debug")
    async with anyio.create_task_group() as tg:
        for _ in range(MAX_DELIVERING + 50):
            tg.start_soon(logs.deliver, "s", MESSAGE)
        await anyio.wait_all_tasks_blocked()
        gate.set()
    assert len(delivered) == MAX_DELIVERING and logs.dropped == 50


class Unanswered(Relaying):
    """A back channel whose client never answers."""

    def __init__(self) -> None:
        self.asked = 0

    async def _relay(self, request: types.InputRequest, key: str | None) -> Any:
        self.asked += 1
        await anyio.sleep_forever()


async def test_requests_waiting_on_one_client_are_bounded() -> None:
    channel = Unanswered()
    async with anyio.create_task_group() as tg:
        for _ in range(MAX_WAITING):
            tg.start_soon(channel.list_roots)
        await anyio.wait_all_tasks_blocked()
        refused = await channel.sample(types.CreateMessageRequestParams(messages=[], max_tokens=1))
        tg.cancel_scope.cancel()
    assert isinstance(refused, types.ErrorData) and f"{MAX_WAITING} requests are already waiting" in refused.message
    assert channel.asked == MAX_WAITING


async def test_a_request_the_client_never_answers_gets_a_timeout_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_channels, "ANSWER_TIMEOUT", 0.05)
    with anyio.fail_after(5):
        answer = await Unanswered().list_roots()
    assert isinstance(answer, types.ErrorData) and answer.code == types.REQUEST_TIMEOUT


async def test_unclaimed_notices_past_the_buffer_are_dropped_never_blocking_the_upstream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nobody delivering: the upstream's sink still returns at once; one warning per server, not one a notice."""
    send, receive = anyio.create_memory_object_stream[Notice](NOTICE_BUFFER)
    sink = _dropping_when_full(send)
    notice = types.LoggingMessageNotification(params=MESSAGE)
    with send, receive, caplog.at_level(logging.WARNING, logger="proxy.app"), anyio.fail_after(5):
        for _ in range(NOTICE_BUFFER + 50):
            await sink("storm", notice)
        await sink("other", notice)
        assert receive.statistics().current_buffer_used == NOTICE_BUFFER
        receive.receive_nowait()
        await sink("storm", notice)  # room again: taken, and the next overflow is said again
        await sink("storm", notice)
    assert [r.getMessage() for r in caplog.records] == [
        f"server storm: {NOTICE_BUFFER} notices wait to be delivered; dropping new ones",
        f"server other: {NOTICE_BUFFER} notices wait to be delivered; dropping new ones",
        f"server storm: {NOTICE_BUFFER} notices wait to be delivered; dropping new ones",
    ]
