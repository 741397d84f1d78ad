"""`limits:` in `toolsets.yaml` on running `toolbridge serve --transport http` processes with per-user
OAuth tokens: calls per minute and concurrent calls per principal and per tool, under fifty clients of
two principals and both eras, on one process and on two replicas sharing a real Redis (issue 34).

A refused call is a tool error naming the limit and when to retry, and never reaches the upstream (the
upstream logs every call it gets); `/metrics` counts the refusals and `/status` shows the usage.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port, missing_programs, needs
from fleetdir import CONTROLLABLE, serve_http
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from servers.cluster import redis_server
from servers.jwt_issuer import Issuer
from servers.tasks_server import CreatedTask, TaskClient

pytestmark = pytest.mark.anyio

ISSUER = "https://id.limits.test"
AUDIENCE = "https://toolbridge.limits.test/mcp"
UPSTREAM = str(Path(__file__).resolve().parent.parent / "redteam" / "upstream.py")
TASKS_SERVER = str(Path(__file__).resolve().parent.parent / "servers" / "tasks_server.py")
PER_MINUTE = 12  # the `echoes` limit: calls of data__echo per principal per minute
CONCURRENT = 2  # the `sleeps` limit: ctl__sleep calls in flight per principal
CLIENTS = 50
HEAVY = 40  # of the CLIENTS, this many act for the principal that hits its limit; the rest for the other
RETRY = re.compile(r"retry in (\d+) s")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Site:
    urls: tuple[str, ...]  # one `/mcp` URL per replica
    issuer: Issuer
    config: Path
    calls_log: Path

    tokens: dict[str, str] = field(default_factory=dict)

    def token(self, user: str) -> str:
        if user not in self.tokens:
            self.tokens[user] = self.issuer.token(sub=user)
        return self.tokens[user]

    def upstream_calls(self, marker: str) -> int:
        """Calls of data__echo the upstream got whose text starts with `marker`."""
        lines = self.calls_log.read_text().splitlines() if self.calls_log.exists() else []
        return sum(1 for line in lines if json.loads(line)[1].get("text", "").startswith(marker))


def write_site(directory: Path, redis_url: str | None = None) -> tuple[Path, Issuer, Path]:
    issuer = Issuer(ISSUER, audience=AUDIENCE)
    (directory / "jwks.json").write_text(json.dumps({"keys": [key.jwk() for key in issuer.keys]}))
    calls_log = directory / "calls.jsonl"
    data = {
        "name": "data",
        "calls_log": str(calls_log),
        "tools": [
            {
                "name": "echo",
                "description": "Echo.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            }
        ],
    }
    upstreams = {
        "data": {"command": sys.executable, "args": [UPSTREAM, json.dumps(data)], "connect_timeout": 30},
        "ctl": {"command": sys.executable, "args": [CONTROLLABLE], "connect_timeout": 30},
        "jobs": {"command": sys.executable, "args": [TASKS_SERVER], "connect_timeout": 30},
    }
    toolsets: dict[str, Any] = {
        "core": ["data__echo", "ctl__sleep", "ctl__echo", "jobs__forever"],
        "startup_wait": 30,
        "auth": {
            "issuer": ISSUER,
            "audience": AUDIENCE,
            "jwks_file": str(directory / "jwks.json"),
            "scopes_required": ["mcp"],
        },
        "limits": {
            "echoes": {"per": "principal", "tool": "data__echo", "calls_per_minute": PER_MINUTE},
            "sleeps": {"per": "principal", "tool": "ctl__sleep", "concurrent": CONCURRENT},
            "jobs": {"per": "principal", "server": "jobs", "calls_per_minute": 2},
        },
    }
    if redis_url is not None:
        toolsets["redis_url"] = redis_url
    config = directory / "config"
    (config / "upstreams").mkdir(parents=True)
    for name, spec in upstreams.items():
        (config / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    (config / "toolsets.yaml").write_text(yaml.safe_dump(toolsets))
    return config, issuer, calls_log


@pytest.fixture(scope="module")
async def one(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    config, issuer, calls_log = write_site(tmp_path_factory.mktemp("limits-one"))
    async with serve_http(config, free_port(), ready=(200,)) as base:
        yield Site((f"{base}/mcp",), issuer, config, calls_log)


@pytest.fixture(scope="module")
async def replicated(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    if why := missing_programs("redis-server"):  # the `site` param says so too; this is where it starts
        pytest.skip(why)
    directory = tmp_path_factory.mktemp("limits-replicas")
    async with redis_server(directory / "redis") as url:
        config, issuer, calls_log = write_site(directory, url)
        async with (
            serve_http(config, free_port(), "--replica-id", "r0", ready=(200,)) as first,
            serve_http(config, free_port(), "--replica-id", "r1", ready=(200,)) as second,
        ):
            yield Site((f"{first}/mcp", f"{second}/mcp"), issuer, config, calls_log)


@pytest.fixture(params=["one", pytest.param("replicated", marks=needs("redis-server"))])
def site(request: pytest.FixtureRequest) -> Site:
    return request.getfixturevalue(request.param)


def http_for(token: str) -> httpx2.AsyncClient:
    """One HTTP client for many SDK clients of one principal (building one per SDK client costs more than its call)."""
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=30, limits=httpx2.Limits(max_connections=None)
    )


@asynccontextmanager
async def session(
    url: str, http: httpx2.AsyncClient, mode: str, name: str = "ide", **options: Any
) -> AsyncIterator[Client]:
    async with Client(
        streamable_http_client(url, http_client=http),
        mode=mode,
        client_info=types.Implementation(name=name, version="1"),
        **options,
    ) as connected:
        yield connected


@asynccontextmanager
async def client(url: str, token: str, mode: str, **options: Any) -> AsyncIterator[Client]:
    async with http_for(token) as http, session(url, http, mode, **options) as connected:
        yield connected


def text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def mode_of(index: int) -> str:
    return "auto" if index % 2 else "legacy"


async def call(c: Client, name: str, arguments: dict[str, Any], *, bridged: bool) -> types.CallToolResult:
    if bridged:
        return await c.call_tool("tool_call", {"name": name, "arguments": arguments})
    return await c.call_tool(name, arguments)


def assert_rate_refusal(result: types.CallToolResult) -> int:
    """A refusal by `echoes`: a tool error naming the limit and a retry time within the minute; returns it."""
    said = text(result)
    assert result.is_error and "echoes" in said and f"{PER_MINUTE} calls per minute" in said, said
    retry = RETRY.search(said)
    assert retry is not None and 1 <= int(retry.group(1)) <= 60, said
    return int(retry.group(1))


async def refusals(site: Site, token: str, limit: str) -> float:
    """`toolbridge_limit_refusals_total` of `limit`, summed over the replicas (each counts its own)."""
    total = 0.0
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        for url in site.urls:
            exposition = (await http.get(f"{url.removesuffix('/mcp')}/metrics")).text
            pattern = rf'^toolbridge_limit_refusals_total\{{limit="{limit}"\}} (\S+)$'
            found = re.search(pattern, exposition, re.MULTILINE)
            total += float(found.group(1)) if found else 0.0
    return total


def label(user: str) -> str:
    """How `/status` shows a user: a digest of its principal (`oauth:` and its issuer and subject)."""
    principal = "oauth:" + json.dumps([ISSUER, user])
    return "user:" + hashlib.sha256(principal.encode()).hexdigest()[:12]


async def status(url: str, token: str) -> dict[str, Any]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        return (await http.get(f"{url.removesuffix('/mcp')}/status")).json()


async def test_fifty_clients_of_two_principals_one_hits_its_calls_per_minute_the_other_is_unaffected(
    site: Site, request: pytest.FixtureRequest
) -> None:
    heavy, light = f"heavy-{request.node.callspec.id}", f"light-{request.node.callspec.id}"
    before = await refusals(site, site.token(light), "echoes")
    results: dict[int, types.CallToolResult] = {}

    async def one_client(index: int) -> None:
        user, http = (heavy, heavy_http) if index < HEAVY else (light, light_http)
        # A client name of its own each: the count is the principal's, whatever its clients call themselves.
        async with session(site.urls[index % len(site.urls)], http, mode_of(index), f"agent-{index}") as c:
            results[index] = await call(c, "data__echo", {"text": f"{user} {index}"}, bridged=index % 4 >= 2)

    with anyio.fail_after(30):
        async with (
            http_for(site.token(heavy)) as heavy_http,
            http_for(site.token(light)) as light_http,
            anyio.create_task_group() as tg,
        ):
            for index in range(CLIENTS):
                tg.start_soon(one_client, index)

    passed = [i for i, r in results.items() if not r.is_error]
    refused = [i for i, r in results.items() if r.is_error]
    assert len(results) == CLIENTS
    assert sorted(i for i in passed if i >= HEAVY) == list(range(HEAVY, CLIENTS))  # light: every call passed
    assert sum(1 for i in passed if i < HEAVY) == PER_MINUTE  # heavy: exactly its limit
    assert all(i < HEAVY for i in refused) and len(refused) == HEAVY - PER_MINUTE
    for index in refused:
        assert_rate_refusal(results[index])
    assert site.upstream_calls(f"{heavy} ") == PER_MINUTE  # no refused call reached the upstream
    assert site.upstream_calls(f"{light} ") == CLIENTS - HEAVY
    assert await refusals(site, site.token(light), "echoes") - before == HEAVY - PER_MINUTE

    for url in site.urls:  # every replica sees the heavy principal's spent minute
        async with client(url, site.token(heavy), "auto") as c:
            assert_rate_refusal(await c.call_tool("data__echo", {"text": f"{heavy} again"}))
    usage = [
        entry for entry in (await status(site.urls[-1], site.token(light)))["limits"] if entry["limit"] == "echoes"
    ]
    assert usage and usage[0]["calls_per_minute"] == PER_MINUTE
    assert {"key": label(heavy), "calls_last_minute": PER_MINUTE, "concurrent": 0} in usage[0]["usage"]
    assert f"{ISSUER}" not in json.dumps(usage) and heavy not in json.dumps(usage)  # every token holder reads it


async def test_concurrent_calls_are_capped_per_principal_and_every_slot_comes_back(
    site: Site, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    heavy, light = f"heavy-{request.node.callspec.id}", f"light-{request.node.callspec.id}"
    until = tmp_path / "done"
    started: list[types.CallToolResult] = []

    async with AsyncExitStack() as stack:
        heavy_http = await stack.enter_async_context(http_for(site.token(heavy)))
        light_http = await stack.enter_async_context(http_for(site.token(light)))
        heavy_clients = [
            await stack.enter_async_context(session(site.urls[i % len(site.urls)], heavy_http, mode_of(i)))
            for i in range(CONCURRENT + 4)
        ]
        light_clients = [
            await stack.enter_async_context(session(site.urls[-1 - i % len(site.urls)], light_http, mode_of(i)))
            for i in range(CONCURRENT)
        ]
        sleeping = {"seconds": 20, "steps": 200, "until": str(until)}

        async def hold(c: Client, index: int) -> None:
            started.append(await call(c, "ctl__sleep", sleeping, bridged=index % 2 == 1))

        async with anyio.create_task_group() as tg:
            for index, c in enumerate(heavy_clients[:CONCURRENT] + light_clients):
                tg.start_soon(hold, c, index)
            with anyio.fail_after(10):  # both principals hold their slots (the upstream is sleeping for them)
                while True:
                    usage = await limit_usage(site, site.token(light), "sleeps")
                    if usage.get(label(heavy)) == CONCURRENT and usage.get(label(light)) == CONCURRENT:
                        break
                    await anyio.sleep(0.05)
            for index, c in enumerate(heavy_clients[CONCURRENT:]):  # every further heavy call is refused at once
                with anyio.fail_after(5):
                    refused = await call(c, "ctl__sleep", sleeping, bridged=index % 2 == 1)
                said = text(refused)
                assert refused.is_error and "sleeps" in said and f"{CONCURRENT} concurrent calls" in said, said
                assert "retry" in said
            until.write_text("done")
        assert len(started) == 2 * CONCURRENT and not any(r.is_error for r in started)

        with anyio.fail_after(10):  # every slot came back: the heavy principal may call again
            async with anyio.create_task_group() as tg:
                for index, c in enumerate(heavy_clients[:CONCURRENT]):
                    tg.start_soon(hold, c, index)
        assert not any(r.is_error for r in started)


async def limit_usage(site: Site, token: str, limit: str) -> dict[str, int]:
    """The concurrent calls of each principal under `limit`, summed over the replicas' `/status`."""
    found: dict[str, int] = {}
    for url in site.urls:
        for entry in (await status(url, token))["limits"]:
            if entry["limit"] == limit:
                for usage in entry["usage"]:
                    found[usage["key"]] = max(found.get(usage["key"], 0), usage["concurrent"])
    return found


async def test_a_cancelled_or_dropped_call_gives_its_slot_back(site: Site) -> None:
    """A handshake-era client cancels its call (`notifications/cancelled`); a 2026-era one drops the request."""
    token = site.token("canceller")
    for attempt in range(CONCURRENT + 2):
        url = site.urls[attempt % len(site.urls)]
        async with client(url, token, mode_of(attempt)) as c, anyio.create_task_group() as tg:
            tg.start_soon(c.call_tool, "ctl__sleep", {"seconds": 20, "steps": 200})
            with anyio.fail_after(10):  # the call holds its slot
                while not (await limit_usage(site, token, "sleeps")).get(label("canceller")):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        with anyio.fail_after(10):
            while (await limit_usage(site, token, "sleeps")).get(label("canceller")):
                await anyio.sleep(0.05)
    for url in site.urls:
        async with client(url, token, "auto") as c:
            result = await c.call_tool("ctl__sleep", {"seconds": 0.01, "steps": 1})
        assert not result.is_error, text(result)


async def test_a_call_that_becomes_a_task_counts_against_the_limit(one: Site) -> None:
    async with client(one.urls[0], one.token("tasker"), "auto", extensions=[TaskClient()]) as c:
        for _ in range(2):
            assert isinstance(await c.session.call_tool("jobs__forever", {}, allow_claimed=True), CreatedTask)
        refused = await c.session.call_tool("jobs__forever", {}, allow_claimed=True)
    assert isinstance(refused, types.CallToolResult) and refused.is_error
    said = text(refused)
    assert "limit 'jobs' reached (2 calls per minute per principal on server jobs)" in said and RETRY.search(said)


async def test_a_reloaded_limit_applies_to_the_next_call(one: Site) -> None:
    token = one.token("reloader")
    toolsets = one.config / "toolsets.yaml"
    before = toolsets.read_text()
    settings = yaml.safe_load(before)
    tight = {"per": "profile", "server": "ctl", "calls_per_minute": 3}
    try:
        async with client(one.urls[0], token, "auto") as c:
            for _ in range(4):
                assert not (await c.call_tool("ctl__echo", {"text": "hi"})).is_error
            toolsets.write_text(yaml.safe_dump({**settings, "limits": {**settings["limits"], "tight": tight}}))
            with anyio.fail_after(10):
                while not (result := await c.call_tool("ctl__echo", {"text": "hi"})).is_error:
                    await anyio.sleep(0.1)
        said = text(result)
        assert "limit 'tight' reached (3 calls per minute per profile on server ctl)" in said and RETRY.search(said)
    finally:
        toolsets.write_text(before)
        with anyio.fail_after(10):  # the other tests' limits are back
            while "tight" in [entry["limit"] for entry in (await status(one.urls[0], token))["limits"]]:
                await anyio.sleep(0.1)
