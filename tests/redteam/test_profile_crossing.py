"""One OAuth user granted two profiles (dana: groups `admins` and `ops-team`), and other users, against one
`toolbridge serve --transport http` with `auth:`. Everything a session holds (pins, task ids, `requestState`,
listen streams) is made in the wide profile `default` (plain `/mcp`) and replayed in the narrow one
(`/mcp/opsonly`, which holds `data__echo` alone), where the `secret`, `jobs`, `asker` and the rest of `data`
are out of scope: 'A session stays in its scope. It cannot search, describe, call, read, subscribe to or
complete anything outside its profile' (docs/security.md), whatever it made elsewhere. Then the request
body itself: batches, duplicate keys, spellings of an out-of-scope name, a JSON-RPC id two users share.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port
from mcp import Client, MCPError, types
from rt import (
    SERVERS,
    TASK_CAPS,
    client,
    handshake,
    ignore_sampling,
    in_session,
    listed,
    oauth_issuer,
    parse,
    post,
    scrub,
    serve_http,
    text,
    tool,
    upstream,
    write_config,
)
from servers.jwt_issuer import Issuer
from servers.tasks_server import CreatedTask, TaskClient, poll

pytestmark = pytest.mark.anyio

BOTH = ("admins", "ops-team")


@dataclass
class Site:
    url: str
    issuer: Issuer
    secret_calls: Path

    @property
    def narrow(self) -> str:
        return f"{self.url}/opsonly"

    def token(self, user: str, groups: tuple[str, ...] = BOTH) -> str:
        return self.issuer.token(sub=user, groups=list(groups))

    def secret_was_called(self) -> list[Any]:
        return [json.loads(line) for line in self.secret_calls.read_text().splitlines()] \
            if self.secret_calls.exists() else []


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    async with crossing_site(tmp_path_factory.mktemp("crossing")) as built:
        yield built


@asynccontextmanager
async def crossing_site(directory: Path) -> AsyncIterator[Site]:
    """The gateway: `default` (every server; core tools listed) and `opsonly` (`data__echo`), OAuth users
    whose `groups` claim picks among them."""
    calls = directory / "secret-calls.jsonl"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    issuer, auth = oauth_issuer(directory, url)
    upstreams = {
        "jobs": {"command": sys.executable, "args": [str(SERVERS / "tasks_server.py")], "connect_timeout": 30},
        "asker": {"command": sys.executable, "args": [str(SERVERS / "mcpserver_fixture.py")], "protocol": "legacy",
                  "connect_timeout": 30},
        "data": upstream("data", tools=[tool("big", size={"type": "integer"}), tool("echo")]),
        "secret": upstream("secret", calls_log=str(calls), tools=[tool("wipe", "Wipe the vault."), tool("mutate"),
                                                                  tool("victim")],
                           resources=[{"uri": "secret://vault", "name": "vault"}],
                           prompts=[{"name": "leak", "description": "Leak."}]),
    }
    toolsets = {
        "core": ["jobs__forever", "jobs__slow", "jobs__ask", "asker__whoami_sampling", "data__big"],
        "toolsets": {"ops": {"tools": ["data__echo"]}},
        "profiles": {"default": {"promote": 3}, "opsonly": {"toolsets": ["ops"], "promote": 3}},
        "startup_wait": 30, "large_results": {"max_chars": 1_000},
        "auth": {**auth, "profile_claim": "groups", "profiles": {"admins": "default", "ops-team": "opsonly"}},
    }
    write_config(directory / "config", upstreams, toolsets)
    async with serve_http(directory / "config", port, ready=(200,)) as base:
        assert f"{base}/mcp" == url
        async with client(url, token=issuer.token(sub="warm", groups=["admins"])) as warm:
            assert "tool_search" in {t.name for t in (await warm.list_tools()).tools}
        yield Site(url, issuer, calls)


async def answer(c: Client, name: str, arguments: dict[str, Any]) -> str:
    """What a client learns from calling `name`: the error or the result, as one comparable string."""
    try:
        result = await c.call_tool(name, arguments)
    except MCPError as error:
        return f"error {error.code} {error.message} {error.data}"
    return f"result error={result.is_error} {text(result)}"


async def pin(c: Client, name: str) -> Any:
    return json.loads(text(await c.call_tool("tool_describe", {"names": [name], "pin": True})))


def refused(status: int, body: dict[str, Any]) -> bool:
    return "result" not in body and (status >= 400 or "error" in body)


# --- what dana made in `default`, replayed in `opsonly` -------------------------------------------


async def test_a_pin_made_in_the_wide_profile_is_neither_listed_nor_callable_in_the_narrow_one(site: Site) -> None:
    """Attacks 'pins (2026 era): the user' against 'A session stays in its scope': a pin is the user's, its tool
    is still the wide profile's."""
    dana = site.token("dana-pins")
    async with client(site.url, token=dana) as wide:
        assert "secret__wipe" in (await pin(wide, "secret__wipe"))["pinned"]
        assert "secret__wipe" in await listed(wide)
    async with client(site.narrow, token=dana) as narrow:
        names = await listed(narrow)
        direct = await answer(narrow, "secret__wipe", {})
        missing = await answer(narrow, "secret__nothing", {})
    assert "secret__wipe" not in names
    assert scrub(direct, "secret__wipe", "secret__nothing") == scrub(missing, "secret__wipe", "secret__nothing")
    assert site.secret_was_called() == []


async def test_a_pin_asked_for_in_the_narrow_profile_pins_nothing_outside_it(site: Site) -> None:
    """Attacks SPEC §8.1 through `tool_describe {pin: true}`: an out-of-scope name answers as a missing one and
    is never pinned, in that profile or another."""
    dana = site.token("dana-narrow-pin")
    async with client(site.narrow, token=dana) as narrow:
        hidden = text(await narrow.call_tool("tool_describe", {"names": ["secret__wipe"], "pin": True}))
        missing = text(await narrow.call_tool("tool_describe", {"names": ["secret__nothing"], "pin": True}))
        names = await listed(narrow)
    assert scrub(hidden, "secret__wipe", "secret__nothing") == scrub(missing, "secret__wipe", "secret__nothing")
    assert "secret__wipe" not in names


async def start_task(url: str, token: str, name: str, arguments: dict[str, Any]) -> str:
    async with client(url, token=token, extensions=[TaskClient()]) as c:
        created = await c.session.call_tool(name, arguments, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created.task_id


async def raw_task(url: str, token: str, method: str, task_id: str) -> tuple[int, dict[str, Any]]:
    async with httpx2.AsyncClient(timeout=30) as http:
        return await post(http, url, method, {"taskId": task_id}, capabilities=TASK_CAPS,
                          headers={"Authorization": f"Bearer {token}"})


async def test_a_task_made_in_the_wide_profile_cannot_be_polled_or_cancelled_from_the_narrow_one(site: Site) -> None:
    """Attacks 'A session stays in its scope' on tasks/get and tasks/cancel: `jobs` is outside `opsonly`, so a
    session there cannot read what a `jobs` task produced nor stop it, even a task its own user made in
    `default` (result links, the documented analogue, are refused 'by the same user in another profile')."""
    dana = site.token("dana-tasks")
    done = await start_task(site.url, dana, "jobs__slow", {"seconds": 0.2})
    running = await start_task(site.url, dana, "jobs__forever", {})
    await anyio.sleep(0.5)
    got = await raw_task(site.narrow, dana, "tasks/get", done)
    cancelled = await raw_task(site.narrow, dana, "tasks/cancel", running)
    async with client(site.url, token=dana, extensions=[TaskClient()]) as wide:
        still = (await poll(wide.session, running)).status
    observed = {"get refused": refused(*got) and "slept" not in json.dumps(got),
                "cancel refused": refused(*cancelled), "still working": still == "working"}
    assert all(observed.values()), observed


MINE = types.CreateMessageResult(role="assistant", model="m", content=types.TextContent(type="text", text="resumed"))


@pytest.mark.parametrize("name", ["asker__whoami_sampling", "data__echo"])
async def test_a_request_state_from_the_wide_profile_resumes_nothing_in_the_narrow_one(site: Site, name: str) -> None:
    """Attacks '`requestState` ... bound to the principal' against the scope: the same user, in a profile without
    `asker`, sends the state under the call's own name and under an in-scope name."""
    dana = site.token("dana-state")
    async with client(site.url, token=dana, sampling_callback=ignore_sampling) as wide:
        first = await wide.session.call_tool("asker__whoami_sampling", {"tag": "t"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        (key,) = first.input_requests or {}
        async with client(site.narrow, token=dana, sampling_callback=ignore_sampling) as narrow:
            try:
                done: Any = await narrow.session.call_tool(name, {"tag": "t"}, input_responses={key: MINE},
                                                           request_state=first.request_state,
                                                           allow_input_required=True)
            except MCPError as error:
                done = error
        assert not (isinstance(done, types.CallToolResult) and "resumed" in text(done)), done
        with anyio.fail_after(30):  # the state still works where it was given
            back = await wide.session.call_tool("asker__whoami_sampling", {"tag": "t"}, input_responses={key: MINE},
                                                request_state=first.request_state, allow_input_required=True)
    assert isinstance(back, types.CallToolResult) and text(back) == "resumed"


async def test_a_listen_stream_in_the_narrow_profile_is_not_acknowledged_for_an_out_of_scope_uri(site: Site) -> None:
    """Attacks 'The ack names only the URIs that a server in scope serves' (subscriptions/listen)."""
    async with client(site.narrow, token=site.token("dana-listen")) as narrow, \
            narrow.listen(resource_subscriptions=["secret://vault", "nothing://here"]) as stream:
        honored = stream.honored
    assert "secret://vault" not in json.dumps(honored.model_dump(mode="json") if honored else None)


async def test_a_completion_for_an_out_of_scope_resource_looks_like_one_that_does_not_exist(site: Site) -> None:
    """Attacks 'cannot ... complete anything outside its profile' with a resource-template reference."""
    async with client(site.narrow, token=site.token("dana-complete")) as narrow:
        seen = []
        for uri in ("secret://vault", "secret://nothing", "toolbridge://server/secret/secret://vault"):
            try:
                done = await narrow.complete(types.ResourceTemplateReference(type="ref/resource", uri=uri),
                                             {"name": "x", "value": ""})
                seen.append(f"values {done.completion.values}")
            except MCPError as error:
                seen.append(f"error {error.code} {error.message}")
    assert not any("secret-value" in answer for answer in seen), seen
    assert scrub(seen[0], "secret://vault", "secret://nothing") == scrub(seen[1], "secret://vault", "secret://nothing")


# --- the request body ---------------------------------------------------------------------------


SPELLINGS = ["SECRET__wipe", "Secret__Wipe", "secret__wipe ", " secret__wipe", "secret__wipe\u200b",
             "secret\u200b__wipe", "ｓｅｃｒｅｔ__ｗｉｐｅ", "secret__wipe\x00", "secret.wipe", "secret/wipe",
             "secret___wipe", "wipe", "secret__WIPE", "secret__wipe\n"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_no_spelling_of_an_out_of_scope_name_reaches_it(site: Site, mode: str) -> None:
    """Attacks SPEC §8.1 with case, Unicode, whitespace and separator variants, called directly and through
    `tool_call`: none reaches `secret`, none answers differently from a name that does not exist."""
    async with client(site.narrow, token=site.token("dana-spell"), mode=mode) as narrow:
        for spelling in SPELLINGS:
            for how, name, arguments in (("direct", spelling, {}),
                                         ("bridge", "tool_call", {"name": spelling, "arguments": {}})):
                hidden = await answer(narrow, name, arguments)
                assert "secret:" not in hidden, (how, spelling, hidden)
    assert site.secret_was_called() == []


async def test_a_batch_or_duplicate_keys_smuggle_no_out_of_scope_call(site: Site) -> None:
    """Attacks the body: a JSON-RPC batch carrying an out-of-scope call, and a body naming the tool twice (an
    in-scope name first, the out-of-scope one last, and the reverse), in both eras' headers."""
    dana = site.token("dana-body")
    call = {"name": "secret__wipe", "arguments": {}}
    params = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientInfo": {"name": "ide", "version": "1"},
                        "io.modelcontextprotocol/clientCapabilities": {}}}
    headers = {"Authorization": f"Bearer {dana}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
               "Mcp-Name": "data__echo"}
    meta = json.dumps(params["_meta"])
    bodies = [
        json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**call, **params}}]),
        json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "data__echo", **params}},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**call, **params}}]),
        '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "data__echo", "name": "secret__wipe",'
        f' "arguments": {{}}, "_meta": {meta}}}}}',
        '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "secret__wipe", "name": "data__echo",'
        f' "arguments": {{}}, "_meta": {meta}}}}}',
        '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "method": "tools/call", "params": {"name": "data__echo",'
        f' "arguments": {{}}, "params": {{"name": "secret__wipe"}}, "_meta": {meta}}}}}',
    ]
    seen = []
    async with httpx2.AsyncClient(timeout=30) as http:
        for body in bodies:
            response = await http.post(site.narrow, content=body, headers=headers)
            seen.append((body[:60], response.status_code, parse(response)))
    assert "secret:" not in json.dumps(seen), seen
    assert site.secret_was_called() == []


async def test_two_users_sharing_a_json_rpc_id_each_get_their_own_answer(site: Site) -> None:
    """Attacks the binding of an answer to its request: alice and bob send the same JSON-RPC id at once, over
    sessions of both eras, and neither gets the other's arguments back."""
    async def ask(user: str, mode: str, box: dict[str, str]) -> None:
        async with client(site.narrow, token=site.token(user), mode=mode) as c:
            for round_ in range(10):
                box[f"{mode}-{round_}"] = text(await c.call_tool(
                    "tool_call", {"name": "data__echo", "arguments": {"who": user}}))

    for mode in ("legacy", "auto"):
        alice: dict[str, str] = {}
        bob: dict[str, str] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(ask, "alice-ids", mode, alice)
            group.start_soon(ask, "bob-ids", mode, bob)
        assert alice and all("alice-ids" in reply and "bob-ids" not in reply for reply in alice.values()), alice
        assert bob and all("bob-ids" in reply and "alice-ids" not in reply for reply in bob.values()), bob


# --- a handshake-era session carried to another profile or token ---------------------------------------

async def test_a_wide_session_is_not_carried_by_a_token_that_no_longer_grants_its_profile(site: Site) -> None:
    """Attacks 'each user's token picks their profile': dana opens a session in `default`, then her token is
    replaced by one whose groups grant `opsonly` alone (her admin group revoked); the session must not keep
    acting in `default`."""
    async with httpx2.AsyncClient(timeout=30) as http:
        session = await handshake(http, site.url, site.token("dana-revoked"))
        narrower = site.token("dana-revoked", ("ops-team",))
        status, body = await in_session(http, site.url, narrower, session, "tools/call",
                                        {"name": "data__big", "arguments": {"size": 20}})
    assert "x" * 20 not in json.dumps(body), (status, body)


async def test_a_2026_request_carrying_a_wide_session_id_is_served_in_its_own_narrow_scope(site: Site) -> None:
    """Attacks 'A 2026-era HTTP request has no session, whatever Mcp-Session-Id header it carries': the header
    names dana's own `default` session; the request goes to `/mcp/opsonly`."""
    dana = site.token("dana-era")
    async with httpx2.AsyncClient(timeout=30) as http:
        session = await handshake(http, site.url, dana)
        status, body = await post(http, site.narrow, "tools/call", {"name": "data__big", "arguments": {"size": 20}},
                                  headers={"Authorization": f"Bearer {dana}", "Mcp-Session-Id": session})
    assert "x" * 20 not in json.dumps(body), (status, body)


async def test_a_session_promoted_in_the_wide_profile_lists_and_calls_nothing_outside_the_narrow_one(
        site: Site) -> None:
    """Attacks 'implicit promotion (handshake era): the session' against the scope: dana's session promotes
    `secret__wipe` at `/mcp`, then the same session id is posted to `/mcp/opsonly` (her token grants both)."""
    dana = site.token("dana-promoted")
    async with httpx2.AsyncClient(timeout=30) as http:
        session = await handshake(http, site.url, dana)
        await in_session(http, site.url, dana, session, "tools/call",
                         {"name": "tool_call", "arguments": {"name": "secret__wipe", "arguments": {}}})
        _, wide = await in_session(http, site.url, dana, session, "tools/list", {})
        assert "secret__wipe" in {t["name"] for t in wide["result"]["tools"]}, wide  # the control
        before = len(site.secret_was_called())
        _, narrow = await in_session(http, site.narrow, dana, session, "tools/list", {})
        _, direct = await in_session(http, site.narrow, dana, session, "tools/call",
                                     {"name": "secret__wipe", "arguments": {}})
    assert "secret__wipe" not in {t["name"] for t in narrow.get("result", {}).get("tools", [])}, narrow
    assert "secret:wipe" not in json.dumps(direct) and len(site.secret_was_called()) == before, direct
