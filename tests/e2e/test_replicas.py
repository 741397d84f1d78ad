"""Scale-out on real parts: nginx (deploy/nginx.conf) in front of three `toolbridge serve` replicas and Redis.

Fifty clients of both eras call through nginx while one replica is killed (SIGKILL) mid-run:
2026-era requests are sessionless and must all succeed; handshake-era clients whose session lived
on the dead replica get 404 (or their in-flight call fails), re-initialize, land on a live replica
and continue; every large-result link (stored in Redis) reads whole afterwards through any replica.
A replica that gets SIGTERM instead finishes its calls in flight and exits.
"""

from __future__ import annotations

import signal
import sys
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port, needs
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from redis.asyncio import Redis
from servers.cluster import nginx, redis_server, replica

pytestmark = [pytest.mark.anyio, needs("nginx", "redis-server")]

CONTROLLABLE = Path(__file__).resolve().parent.parent / "servers" / "controllable.py"
REPLICAS = ("toolbridge-0", "toolbridge-1", "toolbridge-2")
CLIENTS = 50
KILL_AFTER = 150  # calls done, in all, before the kill
AFTER_KILL = 4  # calls every client makes after it
# A handshake-era session gone with its replica: 404 "Session not found" from a backup replica, or
# the stream of a call in flight cut.
SESSION_LOST = (types.INVALID_REQUEST, types.CONNECTION_CLOSED)
LARGE = 1_000  # results above this many characters become a preview and a toolbridge://results link


def write_config(directory: Path) -> Path:
    (directory / "upstreams").mkdir(parents=True)
    spec = {"command": sys.executable, "args": [str(CONTROLLABLE)], "connect_timeout": 20}
    (directory / "upstreams" / "ctl.yaml").write_text(yaml.safe_dump(spec))
    toolsets = {"core": ["*"], "startup_wait": 15, "large_results": {"max_chars": LARGE}}
    (directory / "toolsets.yaml").write_text(yaml.safe_dump(toolsets))
    return directory


def leaves(group: BaseExceptionGroup[MCPError]) -> list[MCPError]:
    nested = (leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc] for exc in group.exceptions)
    return [leaf for found in nested for leaf in found]


def text(result: types.CallToolResult) -> str:
    assert not result.is_error and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


@dataclass
class Run:
    calls: int = 0
    killed: anyio.Event = field(default_factory=anyio.Event)
    reinitialized: Counter[str] = field(default_factory=Counter)  # home replica of each lost session
    homes: Counter[str] = field(default_factory=Counter)  # replica of each session opened
    links: dict[str, tuple[str, bool]] = field(default_factory=dict)  # uri: (whole text, made before the kill)


async def echo_large(client: Client, run: Run, word: str) -> None:
    """A result too large to send whole: a preview and a link into the shared result store."""
    whole = (word + " ") * (3 * LARGE // len(word))
    result = await client.call_tool("ctl__echo", {"text": whole})
    preview, link = result.content[0], result.content[-1]
    assert isinstance(preview, types.TextContent) and preview.text.startswith(whole[:100])
    assert isinstance(link, types.ResourceLink) and link.uri.startswith("toolbridge://results/")
    run.links[link.uri] = (whole, not run.killed.is_set())


async def read_whole(client: Client, uri: str, size: int) -> str:
    pages = []
    for page in range(1, -(-size // LARGE) + 1):
        contents = (await client.read_resource(f"{uri}?page={page}")).contents[0]
        assert isinstance(contents, types.TextResourceContents)
        pages.append(contents.text)
    return "".join(pages)


async def echo_until_done(client: Client, run: Run, index: int, done: list[int]) -> None:
    """Call until this client made `AFTER_KILL` calls after the kill; `done` = [all, after the kill]."""
    while done[1] < AFTER_KILL:
        word = f"client {index} call {done[0]}"
        if client.protocol_version == "2026-07-28" and done[0] % 4 == 1:
            await echo_large(client, run, word)
        else:
            assert text(await client.call_tool("ctl__echo", {"text": word})) == word
        run.calls += 1
        done[0] += 1
        done[1] += run.killed.is_set()
        if run.calls >= KILL_AFTER:
            await anyio.sleep(0)  # let the killer in while every client is still going


async def modern_client(base: str, run: Run, index: int) -> None:
    async with Client(streamable_http_client(f"{base}/mcp"), mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        await echo_until_done(client, run, index, [0, 0])


async def legacy_client(base: str, run: Run, index: int) -> None:
    done = [0, 0]
    sessions: list[str] = []  # this client's session ids, newest last

    async def remember(response: httpx2.Response) -> None:
        if (sid := response.headers.get("mcp-session-id")) and sid not in sessions:
            sessions.append(sid)

    while done[1] < AFTER_KILL:
        async with httpx2.AsyncClient(event_hooks={"response": [remember]}, timeout=30) as http:
            try:
                async with Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy") as client:
                    run.homes[sessions[-1].partition(".")[0]] += 1
                    await echo_until_done(client, run, index, done)
            except* MCPError as lost:
                assert all(exc.code in SESSION_LOST for exc in leaves(lost)), lost.exceptions
                run.reinitialized[sessions[-1].partition(".")[0]] += 1


async def test_fifty_clients_of_both_eras_survive_a_replica_killed_mid_run(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config")
    ports = {replica_id: free_port() for replica_id in REPLICAS}
    run = Run()
    async with redis_server(tmp_path / "redis") as redis_url, AsyncExitStack() as stack:
        processes = {}
        for replica_id, port in ports.items():
            processes[replica_id] = await stack.enter_async_context(
                replica(config, port, replica_id, "--redis-url", redis_url))
        base = await stack.enter_async_context(nginx(tmp_path / "nginx", list(ports.items())))

        async def kill_mid_run() -> None:
            with anyio.fail_after(60):
                while run.calls < KILL_AFTER:
                    await anyio.sleep(0.01)
            processes["toolbridge-1"].send_signal(signal.SIGKILL)
            run.killed.set()

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(kill_mid_run)
                for index in range(CLIENTS):
                    tg.start_soon(legacy_client if index % 2 else modern_client, base, run, index)

        # Every result link still reads whole, through any live replica, those made before the kill too.
        async with Client(streamable_http_client(f"{base}/mcp"), mode="auto") as reader:
            for uri, (whole, _) in run.links.items():
                assert await read_whole(reader, uri, len(whole)) == whole
        shared = Redis.from_url(redis_url)
        cached = await shared.hkeys("toolbridge:catalogs")  # the replicas' catalogs, for the next to start
        await shared.aclose()

    assert set(run.homes) == set(REPLICAS)  # round-robin spread the sessions
    assert run.reinitialized["toolbridge-1"] >= 1  # the dead replica's sessions moved on
    assert set(run.reinitialized) == {"toolbridge-1"}  # and no other session was lost
    assert run.calls >= KILL_AFTER + CLIENTS * AFTER_KILL
    assert sum(before for _, before in run.links.values()) >= 10 and len(run.links) >= CLIENTS // 2
    assert cached == [b"ctl"]


async def test_sigterm_drains_the_calls_in_flight_then_exits(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    results: dict[str, str] = {}
    under_way = {mode: anyio.Event() for mode in ("legacy", "auto")}
    release = tmp_path / "release"

    async def slow_call(mode: str) -> None:
        async def progress(done: float, total: float | None, message: str | None) -> None:
            under_way[mode].set()

        try:
            async with Client(streamable_http_client(f"{base}/mcp", terminate_on_close=False), mode=mode) as client:
                await client.list_tools()  # else the SDK lists them after the result, to check it: too late
                # Only `release` ends the call (the cap is far beyond the test's own deadline): a slow
                # machine cannot finish it before the drain is seen to start.
                result = await client.call_tool("ctl__sleep", {"seconds": 600, "steps": 3000, "until": str(release)},
                                                progress_callback=progress)
                results[mode] = text(result)
        except* httpx2.TransportError:
            pass  # the legacy session's stream, after the server exited; the call's outcome is in `results`

    async with replica(config, port, "toolbridge-0") as process, httpx2.AsyncClient() as http:
        with anyio.fail_after(40):
            async with anyio.create_task_group() as tg:
                for mode in under_way:
                    tg.start_soon(slow_call, mode)
                for event in under_way.values():
                    await event.wait()
                process.send_signal(signal.SIGTERM)
                signalled = anyio.current_time()
                while True:  # no longer accepting, while the calls are still running
                    try:
                        await http.get(f"{base}/healthz")
                    except (httpx2.ConnectError, httpx2.ReadError):  # refused, or closed unanswered mid-shutdown
                        break
                    await anyio.sleep(0.05)
                waited = anyio.current_time() - signalled
                assert results == {}, f"the calls ended before the drain was seen, {waited:.1f} s in"
                release.touch()  # the calls in flight may end now: the drain waits for them
        assert results == {"legacy": "slept", "auto": "slept"}
        with anyio.fail_after(10):  # well within DRAIN_SECONDS: the legacy session's GET stream did not hold it
            await process.wait()
        assert process.returncode == 0
