"""What one OAuth user's activity sends down another user's channels, and what one user's ids do in another
user's handshake-era session: listen streams (list changes announced per principal), progress notifications
(two users' requests carry the same progress token), a 2026-era task id or `requestState` replayed inside a
handshake-era session, and spellings of an out-of-scope resource URI (docs/security.md 'Who a request acts
for', docs/tasks-and-lists.md, docs/back-channels.md). The gateway is `test_profile_crossing`'s."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPError, types
from rt import HANDSHAKE, client, handshake, ignore_sampling, in_session, listed, parse, post, scrub, text
from servers.tasks_server import TaskClient, poll
from test_profile_crossing import Site, crossing_site, pin, start_task

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    async with crossing_site(tmp_path_factory.mktemp("channels")) as built:
        yield built


async def test_a_pin_is_announced_on_the_pinning_users_listen_streams_alone(gateway: Site) -> None:
    """Attacks 'list changes announced by the principal's subscriptions/listen streams': bob, listening for
    tool list changes, learns nothing when alice pins (alice's own stream, the control, is told)."""
    told: dict[str, int] = {"alice-listen": 0, "bob-listen": 0}
    ready = {user: anyio.Event() for user in told}

    async def listen(user: str) -> None:
        async with client(gateway.url, token=gateway.token(user)) as c, c.listen(tools_list_changed=True) as stream:
            ready[user].set()
            async for _ in stream:
                told[user] += 1

    async with anyio.create_task_group() as group:
        for user in told:
            group.start_soon(listen, user)
        with anyio.fail_after(20):
            for event in ready.values():
                await event.wait()
        async with client(gateway.url, token=gateway.token("alice-listen")) as alice:
            assert "data__echo" in (await pin(alice, "data__echo"))["pinned"]
        with anyio.fail_after(10):
            while not told["alice-listen"]:
                await anyio.sleep(0.05)
        await anyio.sleep(1)
        group.cancel_scope.cancel()
    assert told["bob-listen"] == 0, told


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_progress_of_one_users_call_never_reaches_another_user_with_the_same_token(gateway: Site,
                                                                                          mode: str) -> None:
    """Attacks the binding of an upstream's progress to its caller: four users call the progress tool at once,
    each client numbering its requests from the same start (so their progress tokens collide); each gets its
    own three notifications and no more."""
    counts: dict[str, list[float]] = {}

    async def call(user: str) -> None:
        seen: list[float] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            seen.append(done)

        async with client(gateway.url, token=gateway.token(user), mode=mode) as c:
            result = await c.call_tool("tool_call", {"name": "asker__test_tool_with_progress", "arguments": {}},
                                       progress_callback=progress)
        assert not result.is_error, result
        counts[user] = seen

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for n in range(4):
                group.start_soon(call, f"progress-{mode}-{n}")
    assert len(counts) == 4 and all(1 <= len(seen) <= 3 for seen in counts.values()), counts


async def test_another_users_task_id_is_unknown_inside_a_handshake_era_session(gateway: Site) -> None:
    """Attacks 'a client can poll ... only tasks made by its own principal' across eras: alice's 2026-era task
    id, sent by bob inside bob's own handshake-era session (with the extension declared in `_meta` too)."""
    task_id = await start_task(gateway.url, gateway.token("alice-era"), "jobs__forever", {})
    bob = gateway.token("bob-era")
    meta = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    seen = []
    async with httpx2.AsyncClient(timeout=30) as http:
        session = await handshake(http, gateway.url, bob)
        for method in ("tasks/get", "tasks/cancel", "tasks/result"):
            for params in ({"taskId": task_id}, {"taskId": task_id, "_meta": meta}):
                seen.append((method, *await in_session(http, gateway.url, bob, session, method, params)))
    async with client(gateway.url, token=gateway.token("alice-era"), extensions=[TaskClient()]) as alice:
        still = (await poll(alice.session, task_id)).status
    assert not any("result" in body for _, _, body in seen), seen
    assert still == "working"


async def test_another_users_request_state_resumes_nothing_inside_a_handshake_era_session(gateway: Site) -> None:
    """Attacks '`requestState` ... refused when another principal sends it' across eras: bob sends alice's
    state (and an answer to its input request) inside his own handshake-era session, and raw over 2026 HTTP
    under another tool's name."""
    alice_token, bob = gateway.token("alice-state"), gateway.token("bob-state")
    forged = {"role": "assistant", "model": "m", "content": {"type": "text", "text": "forged-by-bob"}}
    async with client(gateway.url, token=alice_token, sampling_callback=ignore_sampling) as alice:
        first = await alice.session.call_tool("asker__whoami_sampling", {"tag": "a"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        (key,) = first.input_requests or {}
        async with httpx2.AsyncClient(timeout=30) as http:
            session = await handshake(http, gateway.url, bob)
            replies = [await in_session(http, gateway.url, bob, session, "tools/call", {
                "name": name, "arguments": {"tag": "a"}, "requestState": first.request_state,
                "inputResponses": {key: forged}}) for name in ("asker__whoami_sampling", "data__big")]
            replies.append(await post(http, gateway.url, "tools/call", {
                "name": "data__big", "arguments": {"size": 1}, "requestState": first.request_state,
                "inputResponses": {key: forged}}, headers={"Authorization": f"Bearer {bob}"}))
        with anyio.fail_after(30):
            mine = types.CreateMessageResult(role="assistant", model="m",
                                             content=types.TextContent(type="text", text="alice's own"))
            done = await alice.session.call_tool("asker__whoami_sampling", {"tag": "a"}, input_responses={key: mine},
                                                 request_state=first.request_state, allow_input_required=True)
    assert "forged-by-bob" not in json.dumps(replies), replies
    assert isinstance(done, types.CallToolResult) and "alice's own" in json.dumps(done.model_dump(mode="json"))


URIS = ["SECRET://vault", "secret://VAULT", "secret://vault/", "secret://vault?x=1", "secret://vault#x",
        "secret:%2F%2Fvault", "secret://vault%00", " secret://vault", "toolbridge://server/SECRET/secret://vault",
        "toolbridge://server/secret/secret%3A%2F%2Fvault", "toolbridge://server/secret/../secret/secret://vault",
        "toolbridge://server/%73ecret/secret://vault", "TOOLBRIDGE://server/secret/secret://vault"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_no_spelling_of_an_out_of_scope_uri_reads_it(gateway: Site, mode: str) -> None:
    """Attacks 'cannot ... read ... anything outside its profile' with case, encoding, suffix and path variants
    of `secret://vault` and its qualified form, from `opsonly`."""
    async with client(gateway.url, token=gateway.token("dana-uris"), mode=mode) as wide:  # the control
        assert "secret says" in json.dumps([c.model_dump(mode="json")
                                            for c in (await wide.read_resource("secret://vault")).contents])
    async with client(gateway.narrow, token=gateway.token("dana-uris"), mode=mode) as narrow:
        for uri in URIS:
            try:
                read = json.dumps([c.model_dump(mode="json") for c in (await narrow.read_resource(uri)).contents])
            except MCPError as error:
                read = f"error {error.code} {error.message}"
            assert "secret says" not in read, (uri, read)


async def test_no_spelling_of_an_out_of_scope_uri_can_be_subscribed_to(gateway: Site) -> None:
    """Attacks 'cannot ... subscribe to ... anything outside its profile' (handshake-era resources/subscribe)
    with the same variants: each answers as a URI that does not exist."""
    dana = gateway.token("dana-subscribe")
    async with httpx2.AsyncClient(timeout=30) as http:
        session = await handshake(http, gateway.narrow, dana)
        missing = await in_session(http, gateway.narrow, dana, session, "resources/subscribe",
                                   {"uri": "nothing://here"})
        for uri in ["secret://vault", *URIS]:
            hidden = await in_session(http, gateway.narrow, dana, session, "resources/subscribe", {"uri": uri})
            assert scrub(hidden, uri) == scrub(missing, "nothing://here"), (uri, hidden, missing)


async def test_forwarding_headers_do_not_move_the_protected_resource(gateway: Site) -> None:
    """Attacks the 401's `resource_metadata` (where a client goes for its token) and the audience check with
    X-Forwarded-Host/-Proto and Forwarded naming another host."""
    forged = {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https", "Forwarded": "host=evil.example",
              "X-Forwarded-Prefix": "/evil"}
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(gateway.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                   headers={"Accept": "application/json, text/event-stream", **forged})
        metadata = await http.get(gateway.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"),
                                  headers=forged)
        issuer = gateway.issuer.token(sub="dana", aud="https://evil.example/mcp", groups=["admins"])
        status, _ = await post(http, gateway.url, "tools/list", {},
                               headers={"Authorization": f"Bearer {issuer}", **forged})
    assert response.status_code == 401 and "evil" not in response.headers.get("www-authenticate", "")
    assert metadata.status_code == 200 and "evil" not in metadata.text, metadata.text
    assert status == 401


async def test_no_spelling_of_an_out_of_scope_prompt_reaches_it(gateway: Site) -> None:
    """Attacks 'cannot ... complete anything outside its profile' and prompts/get outside it with spellings of
    `secret__leak`."""
    async with client(gateway.narrow, token=gateway.token("dana-prompts")) as narrow:
        for name in ("secret__leak", "SECRET__leak", "secret__leak ", "secret\u200b__leak", "ｓｅｃｒｅｔ__leak",
                     "leak", "secret.leak"):
            try:
                got = json.dumps((await narrow.get_prompt(name)).model_dump(mode="json"))
            except MCPError as error:
                got = f"error {error.code} {error.message}"
            assert "secret prompt" not in got, (name, got)


@pytest.mark.parametrize("cursor", ["0", "1", "-1", "-4", "3", "1e0", "01", " 0"])
async def test_a_list_cursor_pages_only_the_sessions_own_list(gateway: Site, cursor: str) -> None:
    """Attacks the pagination token of `resources/list`, `prompts/list` and `resources/templates/list` (an
    offset a client may write): no value pages into another profile's list."""
    dana = gateway.token("dana-cursor")
    async with httpx2.AsyncClient(timeout=30) as http:
        for method in ("resources/list", "prompts/list", "resources/templates/list", "tools/list"):
            status, body = await post(http, gateway.narrow, method, {"cursor": cursor},
                                      headers={"Authorization": f"Bearer {dana}"})
            assert "secret" not in json.dumps(body.get("result", {})), (method, status, body)


async def test_an_out_of_scope_servers_list_change_is_announced_to_no_narrow_session(gateway: Site) -> None:
    """Attacks 'list_changed ... sent only to the sessions whose own list changed' (docs/beyond-tools.md): a
    change of `secret`'s tools (made through `default`) reaches neither a handshake-era session nor a listen
    stream in `opsonly`; a handshake-era session in `default`, the control, is told."""
    told: dict[str, int] = {"wide": 0, "narrow": 0, "narrow-listen": 0}
    ready = anyio.Event()

    def counter(who: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                told[who] += 1
        return on_message

    async def listen() -> None:
        async with client(gateway.narrow, token=gateway.token("dana-changes")) as c, \
                c.listen(tools_list_changed=True) as stream:
            ready.set()
            async for _ in stream:
                told["narrow-listen"] += 1

    async with client(gateway.url, token=gateway.token("dana-changes"), mode="legacy",
                      message_handler=counter("wide")) as wide, \
            client(gateway.narrow, token=gateway.token("dana-changes"), mode="legacy",
                   message_handler=counter("narrow")) as narrow, anyio.create_task_group() as group:
        await listed(wide)
        await listed(narrow)
        group.start_soon(listen)
        with anyio.fail_after(20):
            await ready.wait()
        mutated = await wide.call_tool("tool_call", {"name": "secret__mutate", "arguments": {}})
        assert "mutated" in json.dumps(mutated.model_dump(mode="json")), mutated
        with anyio.fail_after(20):
            while not told["wide"]:
                await anyio.sleep(0.05)
        await anyio.sleep(1.5)
        group.cancel_scope.cancel()
    assert told["narrow"] == 0 and told["narrow-listen"] == 0, told


async def _slow_call(http: httpx2.AsyncClient, url: str, token: str, request_id: int, session: str) -> str:
    """A handshake-era call (`jobs__slow`, 2 s) in `session`: its JSON-RPC answer, or how it ended without one."""
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "tool_call", "arguments": {"name": "jobs__slow", "arguments": {"seconds": 2}}}}
    try:
        response = await http.post(url, json=body, headers=session_headers(token, session))
        return json.dumps(parse(response))
    except (httpx2.HTTPError, ValueError) as error:
        return f"ended without a result: {error!r}"


def session_headers(token: str, session: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
            "Mcp-Session-Id": session, "Mcp-Protocol-Version": HANDSHAKE}


async def test_another_user_cannot_cancel_a_call_by_its_json_rpc_id(gateway: Site) -> None:
    """Attacks the binding of `notifications/cancelled` to its sender: bob names the JSON-RPC id of alice's call
    in flight in his own handshake-era session; alice's call still completes, while her own cancel (the
    control) stops it. (A 2026-era POSTed cancel stops no call, not even its owner's: that era cancels by
    closing the request's stream, so it has no control and is left out.)"""
    alice, bob = gateway.token("alice-cancel"), gateway.token("bob-cancel")
    async with httpx2.AsyncClient(timeout=30) as http:
        alice_session, bob_session = await handshake(http, gateway.url, alice), await handshake(http, gateway.url, bob)
        box: dict[int, str] = {}

        async def call(request_id: int, canceller: dict[str, str]) -> None:
            async def run() -> None:
                box[request_id] = await _slow_call(http, gateway.url, alice, request_id, alice_session)

            async with anyio.create_task_group() as group:
                group.start_soon(run)
                while request_id not in box:  # until the call ends: a loaded machine may register it late
                    for named in (request_id, str(request_id)):
                        await http.post(gateway.url, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                           "params": {"requestId": named, "reason": "stop"}},
                                        headers=canceller)
                    await anyio.sleep(0.2)

        with anyio.fail_after(20):
            await call(41, session_headers(bob, bob_session))
            await call(42, session_headers(alice, alice_session))  # the control: alice's own cancel
    assert "slept 2" in box[41], box
    assert "slept 2" not in box[42], box


NEAR_MISSES = ["secret__wip", "secret__wipd", "secret_wipe", "wipe", "secret", "secret__", "__wipe", "secretwipe"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_no_near_miss_of_an_out_of_scope_name_is_answered_with_a_suggestion_naming_it(gateway: Site,
                                                                                            mode: str) -> None:
    """Attacks SPEC §8.1 through the help a caller gets for a name it misspelled: no 'did you mean', schema hint
    or search result in `opsonly` names `secret__wipe` (or `secret__victim`, `secret__mutate`)."""
    leaked = []
    async with client(gateway.narrow, token=gateway.token("dana-near"), mode=mode) as narrow:
        for name in NEAR_MISSES:
            for how, tool_name, arguments in (
                    ("direct", name, {}), ("tool_call", "tool_call", {"name": name, "arguments": {}}),
                    ("tool_describe", "tool_describe", {"names": [name]}),
                    ("tool_search", "tool_search", {"query": name})):
                try:
                    got = text(await narrow.call_tool(tool_name, arguments))
                except MCPError as error:
                    got = f"{error.message} {error.data}"
                if any(hidden in got for hidden in ("secret__wipe", "secret__victim", "secret__mutate")):
                    leaked.append((how, name, got))
    assert leaked == [], leaked
