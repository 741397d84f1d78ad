"""Two OAuth replicas sharing one Redis (`redis_url`: one signing key, shared pins and result store), one user's
work replayed by another user on the other replica: 'Replicas sharing Redis share a principal's pins',
'every replica makes the same check' for result links, task ids signed with the shared key yet bound to their
principal, and `requestState` 'refused with -32602 when another principal sends it' (docs/security.md,
docs/tasks-and-lists.md, docs/back-channels.md). A refusal must not tell bob that alice's id is real."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import httpx2
import pytest
from conftest import free_port, missing_programs
from mcp import Client, MCPError, types
from rt import (
    SERVERS,
    TASK_CAPS,
    client,
    ignore_sampling,
    listed,
    oauth_issuer,
    post,
    scrub,
    serve_http,
    text,
    tool,
    upstream,
    write_config,
)
from servers.cluster import redis_server
from servers.jwt_issuer import Issuer
from servers.tasks_server import CreatedTask, TaskClient, poll

pytestmark = pytest.mark.anyio

AUDIENCE = "https://mcp.redteam.test/mcp"


@dataclass
class Pair:
    r0: str
    r1: str
    issuer: Issuer

    def token(self, user: str, groups: tuple[str, ...] = ("admins",)) -> str:
        return self.issuer.token(sub=user, groups=list(groups))


@pytest.fixture(scope="module")
async def pair(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pair]:
    if reason := missing_programs("redis-server"):
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("replica-principals")
    issuer, auth = oauth_issuer(directory, AUDIENCE)
    async with redis_server(directory / "redis") as redis_url:
        upstreams = {
            "jobs": {"command": sys.executable, "args": [str(SERVERS / "tasks_server.py")], "connect_timeout": 30},
            "asker": {"command": sys.executable, "args": [str(SERVERS / "mcpserver_fixture.py")],
                      "protocol": "legacy", "connect_timeout": 30},
            "data": upstream("data", tools=[tool("big", size={"type": "integer"}), tool("echo"),
                                            tool("pin_0", "Pinnable.")]),
        }
        toolsets = {
            "core": ["jobs__forever", "asker__whoami_sampling", "data__big"],
            "toolsets": {"ops": {"tools": ["data__echo"]}},
            "profiles": {"default": {"promote": 3}, "opsonly": {"toolsets": ["ops"], "promote": 3}},
            "large_results": {"max_chars": 1_000}, "startup_wait": 30, "redis_url": redis_url,
            "auth": {**auth, "profile_claim": "groups", "profiles": {"admins": "default", "ops-team": "opsonly"}},
        }
        write_config(directory / "config", upstreams, toolsets)
        async with serve_http(directory / "config", free_port(), "--replica-id", "r0", ready=(200,)) as first, \
                serve_http(directory / "config", free_port(), "--replica-id", "r1", ready=(200,)) as second:
            yield Pair(f"{first}/mcp", f"{second}/mcp", issuer)


async def test_a_pin_follows_its_user_to_the_other_replica_and_nobody_else(pair: Pair) -> None:
    """Attacks 'Replicas sharing Redis share a principal's pins' from the other side: bob on r1."""
    async with client(pair.r0, token=pair.token("alice")) as alice:
        pinned = json.loads(text(await alice.call_tool("tool_describe", {"names": ["data__pin_0"], "pin": True})))
        assert "data__pin_0" in pinned["pinned"]
    async with client(pair.r1, token=pair.token("alice")) as alice:
        assert "data__pin_0" in await listed(alice)  # the control: shared for alice
    async with client(pair.r1, token=pair.token("bob")) as bob:
        assert "data__pin_0" not in await listed(bob)


async def _read(c: Client, uri: str) -> str:
    try:
        return json.dumps([item.model_dump(mode="json") for item in (await c.read_resource(uri)).contents])
    except MCPError as error:
        return f"error {error.code} {error.message}"


async def test_a_result_link_is_served_on_the_other_replica_to_its_owner_alone(pair: Pair) -> None:
    """Attacks 'the owner is stored in Redis beside the text, so every replica makes the same check'."""
    async with client(pair.r0, token=pair.token("alice")) as alice:
        result = await alice.call_tool("data__big", {"size": 2_500})
    link = result.content[-1]
    assert isinstance(link, types.ResourceLink), result
    page = f"{link.uri}?page=2"
    async with client(pair.r1, token=pair.token("alice")) as alice:
        assert "x" * 100 in await _read(alice, page)
    async with client(pair.r1, token=pair.token("bob")) as bob:
        by_bob = await _read(bob, page)
    async with client(pair.r1, token=pair.token("alice", ("ops-team",))) as narrower:
        by_alice_narrow = await _read(narrower, page)
    assert "x" * 100 not in by_bob and "unknown, or expired" in by_bob
    assert "x" * 100 not in by_alice_narrow and "unknown, or expired" in by_alice_narrow


async def _task(url: str, token: str, method: str, task_id: str) -> str:
    async with httpx2.AsyncClient(timeout=30) as http:
        status, body = await post(http, url, method, {"taskId": task_id}, capabilities=TASK_CAPS,
                                  headers={"Authorization": f"Bearer {token}"})
    return f"{status} {json.dumps(body.get('error') or body.get('result'))}"


async def test_another_users_task_id_is_unknown_on_either_replica_and_reveals_nothing(pair: Pair) -> None:
    """Attacks 'a client can poll, update or cancel only tasks made by its own principal; anything else is
    -32602 unknown task' with the shared key: bob presents alice's id to the replica that holds the task and
    to the other; each answer equals the one for an id that never existed (the replica holding a stdio task
    is named only to its owner)."""
    async with client(pair.r0, token=pair.token("alice"), extensions=[TaskClient()]) as alice:
        created = await alice.session.call_tool("jobs__forever", {}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    real = created.task_id
    replica, payload, signature = real.split(".")
    fake = f"{replica}.{payload[:-2]}AA.{signature}"
    bob = pair.token("bob")
    leaks = []
    for url in (pair.r0, pair.r1):
        for method in ("tasks/get", "tasks/cancel"):
            to_real, to_fake = await _task(url, bob, method, real), await _task(url, bob, method, fake)
            if scrub(to_real, real) != scrub(to_fake, fake) or '"code": -32602' not in to_real:
                leaks.append((url[-8:], method, to_real, to_fake))
    async with client(pair.r0, token=pair.token("alice"), extensions=[TaskClient()]) as alice:
        still = (await poll(alice.session, real)).status
    assert leaks == [] and still == "working", (leaks, still)


async def test_another_users_request_state_is_refused_on_either_replica_and_reveals_nothing(pair: Pair) -> None:
    """Attacks '`requestState` ... refused with -32602 when another principal sends it' with the shared key:
    bob's answers, on the replica running alice's call and on the other, equal those for an altered state
    (the replica that runs a call is named only to its owner)."""
    forged = types.CreateMessageResult(role="assistant", model="m",
                                       content=types.TextContent(type="text", text="forged-by-bob"))
    async with client(pair.r0, token=pair.token("alice"), sampling_callback=ignore_sampling) as alice:
        first = await alice.session.call_tool("asker__whoami_sampling", {"tag": "a"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        (key,) = first.input_requests or {}
        state = first.request_state
        altered = state[:-4] + ("AAAA" if state[-4:] != "AAAA" else "BBBB")
        answers = []
        for url in (pair.r0, pair.r1):
            async with client(url, token=pair.token("bob"), sampling_callback=ignore_sampling) as bob:
                for sent in (state, altered):
                    try:
                        done = await bob.session.call_tool("asker__whoami_sampling", {"tag": "a"},
                                                           input_responses={key: forged}, request_state=sent,
                                                           allow_input_required=True)
                        answers.append((url[-8:], sent is state, f"answered {done}"))
                    except MCPError as error:
                        answers.append((url[-8:], sent is state, f"error {error.code} {error.message}"))
        with anyio.fail_after(30):
            mine = types.CreateMessageResult(role="assistant", model="m",
                                             content=types.TextContent(type="text", text="alice's own"))
            done = await alice.session.call_tool("asker__whoami_sampling", {"tag": "a"}, input_responses={key: mine},
                                                 request_state=state, allow_input_required=True)
    assert isinstance(done, types.CallToolResult) and text(done) == "alice's own"
    assert all(answer.startswith(f"error {types.INVALID_PARAMS}") for _, _, answer in answers), answers
    for url in (pair.r0[-8:], pair.r1[-8:]):
        real, fake = (answer for where, _, answer in answers if where == url)
        assert real == fake, (url, real, fake)
