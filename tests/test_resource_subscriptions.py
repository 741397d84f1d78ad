"""Resource subscriptions under many sessions: the per-session, session and total caps, and forgetting.

Over HTTP nothing tells toolbridge that a session ended, so what it keeps per session is bounded.
"""

from __future__ import annotations

from typing import Any

import pytest
from inprocess import Inbox, gateway
from mcp import Client, MCPError, types
from mcp.server.lowlevel import Server

from proxy.catalogs import MAX_URI_CHARS
from proxy.downstream.lists._resources import Subscriptions

pytestmark = pytest.mark.anyio

PER_SESSION = Subscriptions.MAX_PER_SESSION


class Watched:
    """A real SDK upstream serving `item://{id}`, which updates a subscribed URI when the test says so."""

    def __init__(self) -> None:
        self.session: Any = None

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[])

        async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
            return types.ListResourcesResult(resources=[])

        async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
            return types.ListResourceTemplatesResult(
                resource_templates=[types.ResourceTemplate(uri_template="item://{id}", name="item")])

        async def read(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
            return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text="item")])

        async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
            self.session = ctx.session
            return types.EmptyResult()

        async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
            return types.EmptyResult()

        return Server("watched", on_list_tools=list_tools, on_list_resources=list_resources,
                      on_list_resource_templates=list_templates, on_read_resource=read,
                      on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe)

    async def update(self, uri: str) -> None:
        await self.session.send_resource_updated(uri)



async def test_a_session_past_its_subscription_cap_gets_a_clear_error_and_keeps_what_it_has() -> None:
    watched, inbox = Watched(), Inbox()
    async with gateway([], servers={"w": watched.server()}) as harness, \
            Client(harness.server, mode="legacy", message_handler=inbox.on_message) as client:
        for i in range(PER_SESSION):
            await client.subscribe_resource(f"item://{i}")
        with pytest.raises(MCPError) as refused:
            await client.subscribe_resource(f"item://{PER_SESSION}")
        await client.subscribe_resource("item://0")  # one it holds already is no new subscription
        await watched.update(f"item://{PER_SESSION - 1}")
        await inbox.receive(f"item://{PER_SESSION - 1}")
        await client.unsubscribe_resource("item://0")
        await client.subscribe_resource(f"item://{PER_SESSION}")  # room again
        await watched.update(f"item://{PER_SESSION}")
        await inbox.receive(f"item://{PER_SESSION}")
    assert refused.value.error.code == types.INVALID_PARAMS
    assert f"at most {PER_SESSION} resource subscriptions" in refused.value.error.message


async def test_a_listen_stream_looks_at_as_many_uris_as_a_session_may_hold_and_none_too_long() -> None:
    too_long = "item://" + "9" * MAX_URI_CHARS
    wanted = [too_long, "item://1", *(f"nobody://{i}" for i in range(PER_SESSION)), "item://2"]
    async with gateway([], servers={"w": Watched().server()}) as harness, \
            Client(harness.server, mode="auto") as client, client.listen(resource_subscriptions=wanted) as stream:
        honored = stream.honored.resource_subscriptions
        with pytest.raises(MCPError) as refused:
            await client.read_resource(too_long)
        assert (await client.read_resource("item://1")).contents
    assert honored == ["item://1"]  # "item://2" comes after the first PER_SESSION asked for
    assert "no server in this session serves" in refused.value.error.message


async def test_a_listen_stream_is_honored_for_as_many_uris_as_a_session_may_hold() -> None:
    watched, inbox = Watched(), Inbox()
    wanted = [f"item://{i}" for i in range(PER_SESSION + 100)]
    async with gateway([], servers={"w": watched.server()}) as harness, \
            Client(harness.server, mode="auto", message_handler=inbox.on_message) as client, \
            client.listen(resource_subscriptions=wanted) as stream:
        honored = stream.honored.resource_subscriptions or []
        await watched.update(f"item://{PER_SESSION - 1}")
        await inbox.receive(f"item://{PER_SESSION - 1}")
    assert honored == wanted[:PER_SESSION]


async def test_a_closed_connection_leaves_the_other_sessions_updates_flowing() -> None:
    watched, inbox = Watched(), Inbox()
    async with gateway([], servers={"w": watched.server()}) as harness, \
            Client(harness.server, mode="legacy", message_handler=inbox.on_message) as staying:
        async with Client(harness.server, mode="legacy") as leaving:
            await leaving.subscribe_resource("item://1")
            await staying.subscribe_resource("item://1")
        await watched.update("item://1")
        await inbox.receive("item://1")


class Recorder:
    """A session's `notify`: which URIs it was told about."""

    def __init__(self) -> None:
        self.told: list[str] = []

    async def __call__(self, uri: str) -> None:
        self.told.append(uri)


async def test_a_forgotten_session_is_told_nothing_and_the_others_still_are() -> None:
    released: list[tuple[str, str]] = []
    subscriptions = Subscriptions(lambda server, uri: released.append((server, uri)))
    gone, kept = Recorder(), Recorder()
    for key, notify in (("gone", gone), ("kept", kept)):
        for i in range(3):
            subscriptions.add(key, ("w", f"item://{i}"), f"item://{i}", notify)
    subscriptions.forget("gone")
    for i in range(3):
        await subscriptions.deliver("w", f"item://{i}")
    assert gone.told == [] and kept.told == ["item://0", "item://1", "item://2"]
    subscriptions.add("again", ("w", "item://0"), "item://0", gone)
    assert released == []  # "kept" holds them all
    subscriptions.remove("kept", ("w", "item://1"))
    assert released == [("w", "item://1")]  # its last subscriber
    subscriptions.forget("kept")  # item://0 is still "again"'s
    assert released == [("w", "item://1"), ("w", "item://2")]


async def test_past_the_session_cap_the_least_recently_subscribing_session_is_dropped() -> None:
    subscriptions = Subscriptions(lambda server, uri: None)
    sessions = [Recorder() for _ in range(Subscriptions.MAX_SESSIONS + 1)]
    for key, notify in enumerate(sessions[:-1]):
        subscriptions.add(key, ("w", f"item://{key}"), f"item://{key}", notify)
    subscriptions.add(0, ("w", "item://0"), "item://0", sessions[0])  # session 0 is recent again
    last = len(sessions) - 1
    subscriptions.add(last, ("w", f"item://{last}"), f"item://{last}", sessions[last])
    for key in (0, 1, 2, last):
        await subscriptions.deliver("w", f"item://{key}")
    assert [bool(sessions[key].told) for key in (0, 1, 2, last)] == [True, False, True, True]


async def test_past_the_total_cap_the_oldest_sessions_are_dropped_whole() -> None:
    subscriptions = Subscriptions(lambda server, uri: None)
    full = Subscriptions.MAX_TOTAL // PER_SESSION
    sessions = [Recorder() for _ in range(full + 1)]
    for key in range(full):
        for i in range(PER_SESSION):
            subscriptions.add(key, ("w", f"item://{key}/{i}"), f"item://{key}/{i}", sessions[key])
    subscriptions.add(full, ("w", "item://new"), "item://new", sessions[full])
    for uri in ("item://0/0", f"item://0/{PER_SESSION - 1}", "item://1/0", "item://new"):
        await subscriptions.deliver("w", uri)
    assert sessions[0].told == [] and sessions[1].told == ["item://1/0"] and sessions[full].told == ["item://new"]
