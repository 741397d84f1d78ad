"""Per-URI resource updates through the fleet: a 2026-era upstream is asked in its listen stream's filter
(it has no `resources/subscribe`), a handshake-era one with `resources/subscribe`; both are asked again
after they reconnect. Downstream clients of both eras subscribe, each the way its era does.

The upstream is `servers/subscribable.py`, a stdio subprocess that reports what it was asked for.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import serve_app
from inprocess import Inbox
from mcp import Client, types
from mcp.types.version import LATEST_HANDSHAKE_VERSION
from servers import subscribable
from servers.listen_framing import json_lines

from proxy.app import run_gateway
from proxy.config import Config, UpstreamConfig
from proxy.downstream import ChangeNotifier, Handlers, build_server
from proxy.errors import UpstreamError
from proxy.upstream import Fleet
from proxy.upstream.fleet._fleet import SUBSCRIBE_WAIT

pytestmark = pytest.mark.anyio

SUBSCRIBABLE = str(Path(subscribable.__file__))
ERAS = ["legacy", "auto"]  # of the downstream client


@asynccontextmanager
async def proxied(
    tmp_path: Path, protocol: str, *flags: str, url: str | None = None
) -> AsyncIterator[tuple[Fleet, Any]]:
    """The fleet with `subscribable` connected in `protocol` (over stdio, or at `url`), and the downstream
    server, wired as `serve` does."""
    where: dict[str, Any] = {"url": url} if url else {"command": sys.executable, "args": (SUBSCRIBABLE, *flags)}
    upstream = UpstreamConfig(name="w", protocol=protocol, restart_wait=20, **where)
    async with run_gateway(Config(directory=tmp_path, upstreams={"w": upstream})) as gateway, \
            anyio.create_task_group() as tg:
        with anyio.fail_after(30):
            await gateway.fleet.ready.wait()
        era = LATEST_HANDSHAKE_VERSION if protocol == "legacy" else "2026-07-28"
        assert [s.protocol_version for s in gateway.fleet.status()] == [era]
        notifier = ChangeNotifier(gateway.views)
        await tg.start(notifier.run)
        handlers = Handlers(gateway.views, gateway.fleet, notifier, fleet_ready=gateway.fleet.ready, startup_wait=5,
                            notices=gateway.notices)
        await tg.start(handlers.run)
        yield gateway.fleet, build_server(handlers)
        tg.cancel_scope.cancel()



@asynccontextmanager
async def subscribed(client: Client, era: str, *uris: str) -> AsyncIterator[None]:
    """Subscribe to `uris` for the body: with `resources/subscribe` (handshake era) or a listen stream."""
    if era == "legacy":
        for uri in uris:
            await client.subscribe_resource(uri)
        yield
        for uri in uris:
            await client.unsubscribe_resource(uri)
        return
    async with client.listen(resource_subscriptions=uris) as stream:
        assert stream.honored.resource_subscriptions == list(uris)
        yield


async def update(fleet: Fleet, uri: str) -> None:
    await fleet.call_tool("w", "update", {"uri": uri})


async def asked(fleet: Fleet) -> dict[str, Any]:
    """What the upstream was asked for: `latest` listen filter, `open` streams' filters, `subscribed` URIs
    (and `listens`, the streams opened, and its `pid`)."""
    result = await fleet.call_tool("w", "asked", {})
    assert isinstance(result.content[0], types.TextContent)
    return json.loads(result.content[0].text)


async def until_asked(fleet: Fleet, condition: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Ask the upstream again until `condition` holds (it applies a change on its own time, or restarts)."""
    with anyio.fail_after(30):
        while True:
            try:
                now = await asked(fleet)
                if condition(now):
                    return now
            except UpstreamError:
                pass  # restarting
            await anyio.sleep(0.05)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("protocol", ["auto", "2026"])  # "2026": the version pinned, no probe
async def test_a_2026_upstream_sends_updates_of_exactly_the_subscribed_uris_to_their_subscribers(
    tmp_path: Path, protocol: str, era: str
) -> None:
    a, b = Inbox(), Inbox()
    async with proxied(tmp_path, protocol) as (fleet, proxy), \
            Client(proxy, mode=era, message_handler=a.on_message) as client_a, \
            Client(proxy, mode=era, message_handler=b.on_message) as client_b, \
            subscribed(client_a, era, "item://3"), subscribed(client_b, era, "item://2"):
        async with subscribed(client_a, era, "item://1"):
            filters = await asked(fleet)
            await update(fleet, "item://1")
            await a.receive("item://1")
            await update(fleet, "item://2")
            await b.receive("item://2")
        after = await until_asked(fleet, lambda now: now["open"] == [["item://2", "item://3"]])
        await update(fleet, "item://1")
        await update(fleet, "item://3")
        await a.receive("item://3")
        await update(fleet, "item://2")
        await b.receive("item://2", times=2)
    assert filters["latest"] == ["item://1", "item://2", "item://3"] and filters["subscribed"] == []
    assert after["latest"] == ["item://2", "item://3"]
    assert a.uris == ["item://1", "item://3"]  # not item://2 (b's), and no item://1 after unsubscribing
    assert b.uris == ["item://2", "item://2"]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_subscriptions_hold_after_the_upstream_restarts(tmp_path: Path, protocol: str, era: str) -> None:
    inbox = Inbox()
    async with proxied(tmp_path, protocol) as (fleet, proxy), \
            Client(proxy, mode=era, message_handler=inbox.on_message) as client, \
            subscribed(client, era, "item://1", "item://2"):
        os.kill((await asked(fleet))["pid"], signal.SIGKILL)
        wanted = ["item://1", "item://2"]
        again = await until_asked(fleet, lambda now: wanted in (now["latest"], now["subscribed"]))
        await update(fleet, "item://2")
        await inbox.receive("item://2")
    assert again["latest" if protocol == "auto" else "subscribed"] == wanted


@pytest.mark.parametrize("era", ERAS)
async def test_a_handshake_era_upstream_is_subscribed_and_unsubscribed_by_request(tmp_path: Path, era: str) -> None:
    inbox = Inbox()
    async with proxied(tmp_path, "legacy") as (fleet, proxy), \
            Client(proxy, mode=era, message_handler=inbox.on_message) as client:
        async with subscribed(client, era, "item://1"):
            during = await asked(fleet)
            await update(fleet, "item://1")
            await inbox.receive("item://1")
        after = await until_asked(fleet, lambda now: now["subscribed"] == [])
    assert (during["latest"], during["open"], during["subscribed"]) == (None, [], ["item://1"])
    assert after["latest"] is None


async def test_uris_the_upstream_does_not_honor_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with proxied(tmp_path, "auto", "--honor", "item://1") as (_, proxy), Client(proxy, mode="legacy") as client:
        with caplog.at_level(logging.INFO, logger="proxy.upstream"):
            await client.subscribe_resource("item://1")
            await client.subscribe_resource("item://2\x1b[2J")
    logged = [r.getMessage() for r in caplog.records if "no updates for" in r.getMessage()]
    assert logged == ["server w: no updates for 1 subscribed resources (item://2\\x1b[2J)"]


@pytest.mark.parametrize("era", ERAS)
async def test_updates_reach_a_subscriber_under_the_uri_it_used(tmp_path: Path, era: str) -> None:
    inbox = Inbox()
    uris = ["toolbridge://server/w/item://5", "ui://w/panel"]  # the qualified form, and an app's namespaced one
    async with proxied(tmp_path, "auto") as (fleet, proxy), \
            Client(proxy, mode=era, message_handler=inbox.on_message) as client, \
            subscribed(client, era, *uris):
        filters = await asked(fleet)
        await update(fleet, "ui://panel")
        await update(fleet, "item://5")
        await inbox.receive(uris[0])
        await inbox.receive(uris[1])
    assert filters["latest"] == ["item://5", "ui://panel"]


async def test_a_tool_added_while_the_listen_stream_reopens_is_listed(tmp_path: Path) -> None:
    async with proxied(tmp_path, "auto") as (fleet, proxy), Client(proxy, mode="legacy") as client:
        await fleet.call_tool("w", "quietly_add", {"name": "unannounced"})
        await client.subscribe_resource("item://1")  # re-opens the stream: what changed meanwhile is refetched
        with anyio.fail_after(10):
            while fleet.registry.get("w__unannounced") is None:
                await fleet.registry.wait_for_change(fleet.registry.generation)


async def test_subscriptions_hold_when_a_changed_config_restarts_the_upstream(tmp_path: Path) -> None:
    inbox = Inbox()
    async with proxied(tmp_path, "auto") as (fleet, proxy), \
            Client(proxy, mode="legacy", message_handler=inbox.on_message) as client:
        await client.subscribe_resource("item://1")
        before = await asked(fleet)
        config = UpstreamConfig(name="w", command=sys.executable, args=(SUBSCRIBABLE,), timeout=100, restart_wait=20)
        fleet.update({"w": config})
        await until_asked(fleet, lambda now: now["latest"] == ["item://1"] and now["open"] == [["item://1"]]
                          and now["pid"] != before["pid"])
        await update(fleet, "item://1")
        await inbox.receive("item://1")


async def test_a_session_that_ends_gives_up_its_subscriptions(tmp_path: Path) -> None:
    async with proxied(tmp_path, "auto") as (fleet, proxy), Client(proxy, mode="legacy") as staying:
        await staying.subscribe_resource("item://1")
        async with Client(proxy, mode="legacy") as leaving:
            await leaving.subscribe_resource("item://2")
            both = await asked(fleet)
        after = await until_asked(fleet, lambda now: now["open"] == [["item://1"]])
    assert both["latest"] == ["item://1", "item://2"] and after["latest"] == ["item://1"]


async def test_a_listen_stream_naming_many_uris_reopens_the_upstream_stream_once(tmp_path: Path) -> None:
    wanted = [f"item://{i:03d}" for i in range(200)]
    async with proxied(tmp_path, "auto") as (fleet, proxy), Client(proxy, mode="auto") as client:
        before = await asked(fleet)
        async with subscribed(client, "auto", *wanted):
            during = await asked(fleet)
    assert during["latest"] == wanted and during["listens"] == before["listens"] + 1


async def test_a_2026_upstream_over_http_is_asked_for_each_new_set_of_uris(tmp_path: Path) -> None:
    inbox = Inbox()
    async with serve_app(subscribable.build_server().streamable_http_app()) as base, \
            proxied(tmp_path, "auto", url=f"{base}/mcp") as (fleet, proxy), \
            Client(proxy, mode="legacy", message_handler=inbox.on_message) as client:
        await client.subscribe_resource("item://1")
        await client.subscribe_resource("item://2")
        await client.unsubscribe_resource("item://1")
        after = await until_asked(fleet, lambda now: now["open"] == [["item://2"]])
        await update(fleet, "item://1")
        await update(fleet, "item://2")
        await inbox.receive("item://2")
    assert after["latest"] == ["item://2"] and inbox.uris == ["item://2"]


async def test_a_listen_stream_of_json_lines_is_acknowledged_and_carries_updates(tmp_path: Path) -> None:
    """Its acknowledgement is taken whatever the framing (here one JSON value a line, as `application/json`)."""
    inbox = Inbox()
    app = json_lines(subscribable.build_server().streamable_http_app())
    async with serve_app(app) as base, proxied(tmp_path, "auto", url=f"{base}/mcp") as (fleet, proxy), \
            Client(proxy, mode="legacy", message_handler=inbox.on_message) as client:
        with anyio.fail_after(SUBSCRIBE_WAIT - 1):  # acknowledged, not given up on
            await client.subscribe_resource("item://1")
        await update(fleet, "item://1")
        await inbox.receive("item://1")
    assert inbox.uris == ["item://1"]


async def test_a_subscribe_the_upstream_never_acknowledges_is_answered_within_a_few_seconds(tmp_path: Path) -> None:
    app = json_lines(subscribable.build_server().streamable_http_app(), silent=True)
    async with serve_app(app) as base, proxied(tmp_path, "auto", url=f"{base}/mcp") as (_, proxy), \
            Client(proxy, mode="legacy") as client:
        started = anyio.current_time()
        with anyio.fail_after(SUBSCRIBE_WAIT + 5):
            await client.subscribe_resource("item://1")
    assert anyio.current_time() - started >= SUBSCRIBE_WAIT - 0.5  # it did wait for the acknowledgement
