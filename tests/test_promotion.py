"""Promotion (issues 11, 22): a deferred tool a handshake-era session used, or a 2026-era principal pinned,
joins that session's (principal's) direct tools; a 2026-era list never changes as a side effect (SEP-2567)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from inprocess import Harness, Upstream, gateway, tool
from mcp import Client, types

from proxy.config import ProfileConfig, ToolsetsConfig
from proxy.surface import ALWAYS_LOAD

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
BIG = {f"field_{i}": {"type": "string", "description": "x" * 60} for i in range(40)}


def fleet() -> list[Upstream]:
    return [
        Upstream("disk", [
            tool("resize_volume", "Resize a disk volume.", {"volume": {"type": "string"}}, ["volume"]),
            tool("list_volumes", "List all disk volumes."),
            tool("snapshot_volume", "Snapshot a disk volume."),
            tool("huge_form", "Fill in a very large form.", BIG),
        ]),
        Upstream("mail", [tool("send_email", "Send an email message.", {"to": {"type": "string"}}, ["to"])]),
    ]


CONFIG = ToolsetsConfig(profiles={
    "default": ProfileConfig(promote=2, context_tokens=200_000),
    "small": ProfileConfig(match="small-*", promote=2, context_tokens=20_000),  # budget 1000: huge_form never fits
    "none": ProfileConfig(match="plain-*"),
})


class Session:
    """A client session that counts the tools/list_changed it receives (on its connection or listen stream)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.changes = 0

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.changes += 1

    async def names(self) -> list[str]:
        return [t.name for t in (await self.client.list_tools()).tools]

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        return await self.client.call_tool("tool_call", {"name": name, "arguments": arguments or {}})

    async def promote(self, name: str, arguments: dict[str, Any] | None = None) -> None:
        """Use the tool; a 2026-era client pins it too, as only a pin promotes there."""
        assert not (await self.call(name, arguments)).is_error
        if self.client.protocol_version == "2026-07-28":
            await self.pin(name)

    async def pin(self, name: str, pin: bool = True) -> dict[str, Any]:
        described = await self.client.call_tool("tool_describe", {"names": [name], "pin": pin})
        assert not described.is_error
        return json.loads(described.content[0].text)

    async def listed(self) -> str:
        return (await self.client.list_tools()).model_dump_json(by_alias=True)


@asynccontextmanager
async def session(harness: Harness, mode: str, client_name: str = "ide") -> AsyncIterator[Session]:
    holder: list[Session] = []

    async def on_message(message: Any) -> None:
        await holder[0].on_message(message)

    info = types.Implementation(name=client_name, version="1")
    async with Client(harness.server, mode=mode, message_handler=on_message, client_info=info) as client:
        holder.append(Session(client))
        await client.list_tools()
        async with anyio.create_task_group() as tg:
            if mode != "legacy":
                listening = anyio.Event()

                async def listen() -> None:
                    async with client.listen(tools_list_changed=True) as stream:
                        listening.set()
                        async for _ in stream:
                            pass

                tg.start_soon(listen)
                with anyio.fail_after(5):
                    await listening.wait()
            yield holder[0]
            tg.cancel_scope.cancel()


async def settled(harness: Harness, *sessions: Session) -> None:
    """Every announcement due has been sent and has arrived."""
    with anyio.fail_after(10):
        await harness.notifier.wait_announced(harness.registry.generation)
        await harness.notifier.wait_rechecked()
        for each in sessions:  # a round trip that changes nothing: what was sent before it has arrived
            await each.client.call_tool("tool_search", {"queries": ["volume"]})


@pytest.mark.parametrize("mode", MODES)
async def test_a_used_tool_is_promoted_to_that_session_alone_and_it_is_told(mode: str) -> None:
    async with gateway(fleet(), CONFIG) as harness, session(harness, mode) as one, \
            session(harness, mode, "other-ide") as other:
        assert "disk__resize_volume" not in await one.names()
        await one.promote("disk__resize_volume", {"volume": "v1"})
        await settled(harness, one, other)
        assert (one.changes, other.changes) == (1, 0)
        tools = {t.name: t for t in (await one.client.list_tools()).tools}
        assert tools["disk__resize_volume"].input_schema["required"] == ["volume"]
        assert tools["disk__resize_volume"].meta == {ALWAYS_LOAD: True, "anthropic/maxResultSizeChars": 100_000}
        assert "disk__resize_volume" not in await other.names()
        direct = await one.client.call_tool("disk__resize_volume", {"volume": "v2"})  # now callable directly
        assert not direct.is_error and harness.upstreams["disk"].calls[-1] == ("resize_volume", {"volume": "v2"})


@pytest.mark.parametrize("mode", MODES)
async def test_at_most_n_are_promoted_the_least_recently_used_leaving_first(mode: str) -> None:
    async with gateway(fleet(), CONFIG) as harness, session(harness, mode) as one:
        for name in ("disk__list_volumes", "disk__snapshot_volume", "disk__list_volumes", "mail__send_email"):
            await one.promote(name, {"to": "a@b"} if name.startswith("mail") else {})
            await settled(harness, one)
        names = await one.names()
        assert "disk__list_volumes" in names and "mail__send_email" in names
        assert "disk__snapshot_volume" not in names  # used before list_volumes was used again
        assert one.changes == 3  # list_volumes' second use changed nothing


async def test_in_the_handshake_era_describing_promotes_and_failures_do_not() -> None:
    async with gateway(fleet(), CONFIG) as harness, session(harness, "legacy") as one:
        assert (await one.call("disk__resize_volume", {})).is_error  # missing a required argument
        await settled(harness, one)
        assert one.changes == 0 and "disk__resize_volume" not in await one.names()
        await one.client.call_tool("tool_describe", {"names": ["mail__send_email"]})
        await settled(harness, one)
        assert one.changes == 1 and "mail__send_email" in await one.names()


@pytest.mark.parametrize("mode", MODES)
async def test_promotions_survive_re_registration_and_leave_with_the_tool(mode: str) -> None:
    async with gateway(fleet(), CONFIG) as harness, session(harness, mode) as one:
        await one.promote("disk__list_volumes")
        await settled(harness, one)
        disk = harness.upstreams["disk"]
        disk.tools = [t.model_copy(update={"description": "Changed."}) if t.name == "resize_volume" else t
                      for t in disk.tools]
        await harness.refresh("disk")
        await settled(harness, one)
        assert "disk__list_volumes" in await one.names()
        changes = one.changes
        disk.tools = [t for t in disk.tools if t.name != "list_volumes"]
        await harness.refresh("disk")
        await settled(harness, one)
        assert "disk__list_volumes" not in await one.names() and one.changes == changes + 1


async def test_promotion_stays_within_the_budget_and_off_by_default() -> None:
    async with gateway(fleet(), CONFIG) as harness, session(harness, "legacy", "small-agent") as small, \
            session(harness, "legacy", "plain-agent") as plain:
        await small.call("disk__huge_form")
        await plain.call("disk__list_volumes")
        await settled(harness, small, plain)
        assert "disk__huge_form" not in await small.names() and small.changes == 0
        assert "disk__list_volumes" not in await plain.names() and plain.changes == 0


async def test_a_2026_era_list_depends_on_no_earlier_call() -> None:
    """SEP-2567: two lists in a row are byte-identical whatever was called, described or failed between."""
    async with gateway(fleet(), CONFIG) as harness, session(harness, "auto") as one:
        before = await one.listed()
        assert not (await one.call("disk__resize_volume", {"volume": "v1"})).is_error
        assert (await one.call("disk__list_volumes", {"bad": 1})).is_error is not None
        await one.client.call_tool("tool_describe", {"names": ["mail__send_email", "disk__snapshot_volume"]})
        await one.client.call_tool("tool_search", {"queries": ["email"]})
        await settled(harness, one)
        assert await one.listed() == before and one.changes == 0


async def test_a_2026_era_pin_changes_that_principals_list_alone_and_an_unpin_restores_it() -> None:
    async with gateway(fleet(), CONFIG) as harness, session(harness, "auto") as one, \
            session(harness, "auto", "other-ide") as other:
        before, others = await one.listed(), await other.listed()
        assert (await one.pin("mail__send_email"))["pinned"] == ["mail__send_email"]
        await settled(harness, one, other)
        assert "mail__send_email" in await one.names() and one.changes == 1
        assert await other.listed() == others and other.changes == 0
        assert not (await one.client.call_tool("mail__send_email", {"to": "a@b"})).is_error  # direct now
        pinned = await one.listed()
        await one.call("disk__list_volumes")  # a call after the pin changes nothing either
        await settled(harness, one)
        assert await one.listed() == pinned
        assert (await one.pin("mail__send_email", pin=False))["pinned"] == []
        await settled(harness, one, other)
        assert await one.listed() == before and one.changes == 2
        assert await other.listed() == others and other.changes == 0


async def test_a_pin_where_the_profile_promotes_nothing_changes_nothing() -> None:
    async with gateway(fleet(), CONFIG) as harness, session(harness, "auto", "plain-agent") as plain:
        before = await plain.listed()
        assert (await plain.pin("disk__list_volumes"))["pinned"] == []
        await settled(harness, plain)
        assert await plain.listed() == before and plain.changes == 0
        wrong = await plain.client.call_tool("tool_describe", {"names": ["disk__list_volumes"], "pin": "maybe"})
        assert wrong.is_error and "'pin' must be true or false" in wrong.content[0].text
