"""Two OAuth users at one issuer (alice and bob, same groups; carol in a narrower group) against one
`toolbridge serve --transport http` with `auth:`. Everything that is bound to a principal (task ids,
pins, result links, `requestState`, handshake sessions, the profile) is attacked with B's own valid
token plus forged headers, `_meta` and client names that name A (docs/security.md, docs/back-channels.md,
docs/tasks-and-lists.md, SPEC §8.1: 'No header, `_meta` field, client name or body value chosen by the
client selects another owner')."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from mcp import Client, MCPError, types
from rt import (
    HANDSHAKE,
    ISSUER,
    SERVERS,
    TASK_CAPS,
    client,
    handshake,
    ignore_sampling,
    listed,
    oauth_issuer,
    parse,
    post,
    serve_http,
    text,
    tool,
    upstream,
    write_config,
)
from servers.jwt_issuer import Issuer, SigningKey
from servers.tasks_server import CreatedTask, TaskClient, poll

pytestmark = pytest.mark.anyio

MAX_CHARS = 1_000
SIZE = 2_500
UNKNOWN_RESULT = "unknown, or expired"


@dataclass
class Site:
    url: str
    issuer: Issuer

    def token(self, user: str, groups: tuple[str, ...] = ("admins",), **claims: Any) -> str:
        return self.issuer.token(sub=user, groups=list(groups), **claims)


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    directory = tmp_path_factory.mktemp("oauth")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    issuer, auth = oauth_issuer(directory, url)
    upstreams = {
        "jobs": {"command": sys.executable, "args": [str(SERVERS / "tasks_server.py")], "connect_timeout": 30},
        "asker": {"command": sys.executable, "args": [str(SERVERS / "mcpserver_fixture.py")], "protocol": "legacy",
                  "connect_timeout": 30},
        "data": upstream("data", tools=[tool("big", size={"type": "integer"}), tool("echo"),
                                        *(tool(f"pin_{n}", f"Pinnable tool {n}.") for n in range(6))]),
    }
    toolsets = {
        "core": ["jobs__forever", "jobs__slow", "asker__whoami_sampling", "data__big"],
        "toolsets": {"ops": {"tools": ["data__echo"]}},
        "profiles": {"default": {"promote": 3, "match": "admin-console*"},
                     "opsonly": {"toolsets": ["ops"], "promote": 3}},
        "large_results": {"max_chars": MAX_CHARS},
        "startup_wait": 30,
        "auth": {**auth, "profile_claim": "groups", "profiles": {"admins": "default", "ops-team": "opsonly"}},
    }
    write_config(directory / "config", upstreams, toolsets)
    async with serve_http(directory / "config", port, ready=(200,)) as base:
        assert f"{base}/mcp" == url
        yield Site(url, issuer)


# --- helpers -------------------------------------------------------------------------------------


def forged_keys(user: str, name: str = "ide") -> list[str]:
    """`Mcp-Session-Id` values that spell another user's principal key the ways a server might write it."""
    return [json.dumps([user, name]), json.dumps([user, name], separators=(",", ":")),
            json.dumps([ISSUER, user, name]), json.dumps([[ISSUER, user], name]),
            json.dumps([f"{ISSUER} {user}", name]),
            json.dumps([user, None]), user]


async def start_task(site: Site, user: str, tool_name: str = "jobs__forever") -> str:
    async with client(site.url, token=site.token(user), extensions=[TaskClient()]) as c:
        created = await c.session.call_tool(tool_name, {}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created.task_id


async def task_status(site: Site, user: str, task_id: str) -> str:
    async with client(site.url, token=site.token(user), extensions=[TaskClient()]) as c:
        return (await poll(c.session, task_id)).status


async def raw_task(site: Site, token: str, method: str, task_id: str, *, name: str = "ide",
                   headers: dict[str, str] | None = None, extra_meta: dict[str, Any] | None = None,
                   ) -> tuple[int, dict[str, Any]]:
    async with httpx2.AsyncClient(timeout=30) as http:
        params: dict[str, Any] = {"taskId": task_id}
        if extra_meta:
            params["_meta"] = extra_meta
        return await post(http, site.url, method, params, name=name, capabilities=TASK_CAPS,
                          headers={"Authorization": f"Bearer {token}", **(headers or {})})


def refused_as_unknown_task(status: int, body: dict[str, Any]) -> bool:
    error = body.get("error") or {}
    return "result" not in body and (status >= 400 or error.get("code") == types.INVALID_PARAMS)


async def large_link(c: Client) -> str:
    result = await c.call_tool("data__big", {"size": SIZE})
    link = result.content[-1]
    assert not result.is_error and isinstance(link, types.ResourceLink), result
    return link.uri


async def read_refused(c: Client, uri: str) -> bool:
    try:
        contents = (await c.read_resource(uri)).contents
    except MCPError as error:
        return error.code == types.INVALID_PARAMS and UNKNOWN_RESULT in error.message
    return "x" * 100 not in json.dumps([item.model_dump(mode="json") for item in contents])


# --- the front door -------------------------------------------------------------------------------


async def test_a_request_without_a_valid_token_is_refused_and_pointed_at_the_resource_metadata(site: Site) -> None:
    """Attacks 'answers a request without a valid token with 401 and WWW-Authenticate: Bearer … resource_metadata'."""
    async with httpx2.AsyncClient(timeout=30) as http:
        for headers in ({}, {"Authorization": "Bearer not-a-jwt"}, {"Authorization": "Basic YWxpY2U6cHc="}):
            status, _ = await post(http, site.url, "tools/list", {}, headers=headers)
            response = await http.post(site.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                       headers={"Accept": "application/json, text/event-stream", **headers})
            assert status == 401 and response.status_code == 401
            assert "resource_metadata=" in response.headers.get("www-authenticate", "")


async def test_forged_and_stale_tokens_are_refused(site: Site) -> None:
    """Attacks 'A JWT must be signed by an asymmetric key of the issuer's JWKS ... alg: none and HMAC are refused'."""
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": site.url, "sub": "alice", "iat": now, "exp": now + 300, "scope": "mcp",
              "groups": ["admins"]}
    kid = site.issuer.keys[0].kid
    public_pem = site.issuer.keys[0].private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)

    def part(value: dict[str, Any] | bytes) -> str:
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def unsigned(body: dict[str, Any]) -> str:
        return f"{part({'alg': 'none', 'typ': 'JWT', 'kid': kid})}.{part(body)}."

    def hmac_keyed_with_the_public_key(body: dict[str, Any]) -> str:
        signing_input = f"{part({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{part(body)}"
        return f"{signing_input}.{part(hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest())}"

    impostor = SigningKey(kid=kid)  # same kid, a key the issuer never published
    forged = {
        "alg none": unsigned(claims),
        "HS256 keyed with the public key": hmac_keyed_with_the_public_key(claims),
        "unpublished key, same kid": impostor.sign(claims),
        "wrong audience": site.issuer.token(sub="alice", aud="http://127.0.0.1:1/mcp", groups=["admins"]),
        "wrong issuer": site.issuer.token(sub="alice", iss="https://evil.example", groups=["admins"]),
        "expired": site.issuer.token(sub="alice", iat=now - 900, exp=now - 600, groups=["admins"]),
        "not yet valid": site.issuer.token(sub="alice", nbf=now + 600, groups=["admins"]),
        "signature swapped": site.token("alice").rsplit(".", 1)[0] + "." + site.token("bob").rsplit(".", 1)[1],
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        for why, token in forged.items():
            status, body = await post(http, site.url, "tools/list", {}, headers={"Authorization": f"Bearer {token}"})
            assert status == 401, (why, status, body)


async def test_a_token_without_the_scope_or_a_mapped_group_is_forbidden(site: Site) -> None:
    """Attacks 'a token without a required scope [is] 403' and 'a token whose claim maps to none is 403'."""
    async with httpx2.AsyncClient(timeout=30) as http:
        for token in (site.issuer.token(sub="alice", scope="other", groups=["admins"]),
                      site.token("alice", ("nobody",)), site.issuer.token(sub="alice")):
            status, _ = await post(http, site.url, "tools/list", {}, headers={"Authorization": f"Bearer {token}"})
            assert status == 403


async def test_a_path_or_client_name_cannot_pick_a_profile_the_token_does_not_grant(site: Site) -> None:
    """Attacks '`/mcp/<profile>` only one of those (403 otherwise)' and SPEC §8.1 (a client name selects no owner)."""
    carol = site.token("carol", ("ops-team",))
    async with httpx2.AsyncClient(timeout=30) as http:
        status, _ = await post(http, f"{site.url}/default", "tools/list", {},
                               headers={"Authorization": f"Bearer {carol}"})
        assert status == 403
    async with client(site.url, token=carol, name="admin-console") as c:  # `default` matches this client name
        names = await listed(c)
        refused = await c.call_tool("data__big", {"size": 10})
    assert "data__big" not in names and "jobs__forever" not in names
    assert refused.is_error and "x" * 10 not in text(refused)


# --- task ids ------------------------------------------------------------------------------------


async def test_b_cannot_get_or_cancel_a_task_of_a_with_their_own_headers(site: Site) -> None:
    """Attacks 'a client can poll, update or cancel only tasks made by its own principal' (-32602 unknown task)."""
    task_id = await start_task(site, "alice")
    bob = site.token("bob")
    for method in ("tasks/get", "tasks/cancel"):
        status, body = await raw_task(site, bob, method, task_id)
        assert refused_as_unknown_task(status, body), (method, status, body)
    assert await task_status(site, "alice", task_id) == "working"


async def test_b_cannot_get_a_task_with_forged_session_header(site: Site) -> None:
    """Attacks 'a client can poll ... only tasks made by its own principal', A's key in Mcp-Session-Id (defect 1)."""
    task_id = await start_task(site, "alice")
    bob = site.token("bob")
    leaked = []
    for forged in forged_keys("alice"):
        status, body = await raw_task(site, bob, "tasks/get", task_id, headers={"Mcp-Session-Id": forged})
        if not refused_as_unknown_task(status, body):
            leaked.append((forged, status, body))
    assert leaked == []


async def test_b_cannot_cancel_a_task_with_forged_session_header(site: Site) -> None:
    """Attacks 'a client can ... cancel only tasks made by its own principal', A's key in Mcp-Session-Id (defect 1)."""
    task_id = await start_task(site, "alice")
    bob = site.token("bob")
    accepted = []
    for forged in forged_keys("alice"):
        status, body = await raw_task(site, bob, "tasks/cancel", task_id, headers={"Mcp-Session-Id": forged})
        if not refused_as_unknown_task(status, body):
            accepted.append((forged, status, body))
    assert accepted == [] and await task_status(site, "alice", task_id) == "working"


async def test_b_cannot_get_a_task_of_a_with_forged_meta_client_name_or_trace_context(site: Site) -> None:
    """Attacks SPEC §8.1 'No ... `_meta` field, client name or body value ... selects another owner'."""
    task_id = await start_task(site, "alice")
    bob = site.token("bob")
    attempts: list[dict[str, Any]] = [
        {"name": "ide"},
        {"extra_meta": {"sub": "alice", "subject": "alice", "principal": json.dumps(["alice", "ide"])}},
        {"headers": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                     "tracestate": "sub=alice", "baggage": "sub=alice,principal=alice"}},
        {"headers": {"Mcp-Protocol-Version": HANDSHAKE}},
        {"headers": {"X-Forwarded-User": "alice", "X-Forwarded-For": "10.0.0.1"}},
    ]
    for attempt in attempts:
        status, body = await raw_task(site, bob, "tasks/get", task_id, **attempt)
        assert refused_as_unknown_task(status, body), (attempt, status, body)


async def test_a_tampered_task_id_is_an_unknown_task(site: Site) -> None:
    """Attacks 'The signature is an HMAC ... so an id is opaque and unforgeable'."""
    task_id = await start_task(site, "alice")
    alice = site.token("alice")
    replica, payload, signature = task_id.split(".")
    flipped = "A" if signature[0] != "A" else "B"
    for forged in (f"{replica}.{payload}.{flipped}{signature[1:]}", f"{replica}.{payload[:-1]}{flipped}.{signature}",
                   f"other-replica.{payload}.{signature}", f"{replica}.{payload}.", "task-1"):
        status, body = await raw_task(site, alice, "tasks/get", forged)
        assert refused_as_unknown_task(status, body), (forged, status, body)


# --- pins (SEP-2567) -----------------------------------------------------------------------------


async def pin(c: Client, name: str, on: bool = True) -> Any:
    return json.loads(text(await c.call_tool("tool_describe", {"names": [name], "pin": on})))


async def test_b_does_not_see_the_pins_of_a_with_forged_session_header(site: Site) -> None:
    """Attacks '[pins are] kept for the principal: the OAuth token's subject' with A's key forged (defect 1)."""
    async with client(site.url, token=site.token("alice")) as alice:
        assert "data__pin_0" in (await pin(alice, "data__pin_0"))["pinned"]
        assert "data__pin_0" in await listed(alice)
    seen = []
    for forged in forged_keys("alice"):
        async with client(site.url, token=site.token("bob"), headers={"Mcp-Session-Id": forged}) as bob:
            if "data__pin_0" in await listed(bob):
                seen.append(forged)
    assert seen == []


async def test_b_cannot_unpin_or_pin_for_a_with_forged_session_header(site: Site) -> None:
    """Attacks 'a pin of user A is never changeable by user B, whatever B's headers say' (defect 1)."""
    async with client(site.url, token=site.token("alice")) as alice:
        await pin(alice, "data__pin_1")
    for forged in forged_keys("alice"):
        async with client(site.url, token=site.token("bob"), headers={"Mcp-Session-Id": forged}) as bob:
            await pin(bob, "data__pin_1", on=False)
            await pin(bob, "data__pin_2")
    async with client(site.url, token=site.token("alice")) as alice:
        names = await listed(alice)
    assert "data__pin_1" in names and "data__pin_2" not in names


async def test_the_same_client_name_does_not_share_pins_across_oauth_users(site: Site) -> None:
    """Attacks 'the OAuth token's subject when auth checks tokens, and the client name': two subjects, one name."""
    async with client(site.url, token=site.token("alice"), name="shared-name") as alice:
        await pin(alice, "data__pin_3")
    async with client(site.url, token=site.token("bob"), name="shared-name") as bob:
        assert "data__pin_3" not in await listed(bob)


# --- large results -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_b_cannot_read_a_result_link_of_a_whatever_headers_they_forge(site: Site, mode: str) -> None:
    """Attacks 'A toolbridge://results/<id> link is served only to the same principal in the same profile'."""
    async with client(site.url, token=site.token("alice"), mode=mode) as alice:
        uri = await large_link(alice)
        assert not await read_refused(alice, f"{uri}?page=2")
    for forged in [None, *forged_keys("alice")]:
        headers = {"Mcp-Session-Id": forged} if forged is not None and mode == "auto" else {}
        async with client(site.url, token=site.token("bob"), mode=mode, headers=headers) as bob:
            assert await read_refused(bob, f"{uri}?page=2"), forged
    async with client(site.url, token=site.token("alice", ("ops-team",)), mode=mode) as narrower:
        assert await read_refused(narrower, f"{uri}?page=2")  # alice herself, in a profile without `data`


async def test_a_result_link_with_an_altered_id_is_unknown(site: Site) -> None:
    """Attacks 'The id is 128 random bits. A leaked link is still useless to anyone but its owner' with guessed ids."""
    async with client(site.url, token=site.token("alice")) as alice:
        uri = await large_link(alice)
        base, result_id = uri.rsplit("/", 1)
        altered = result_id[:-1] + ("0" if result_id[-1] != "0" else "1")
        for guess in (altered, result_id.upper(), "0" * len(result_id), f"{result_id}/../{result_id}"):
            assert await read_refused(alice, f"{base}/{guess}?page=2"), guess


# --- handshake-era sessions -----------------------------------------------------------------------


async def test_b_cannot_ride_a_handshake_session_of_a(site: Site) -> None:
    """Attacks SPEC §8.1 'the server-issued session where the transport validated one': B presents A's session id."""
    async with client(site.url, token=site.token("alice"), mode="legacy") as alice:
        uri = await large_link(alice)
    async with httpx2.AsyncClient(timeout=30) as http:
        session = await handshake(http, site.url, site.token("alice"))
        response = await http.post(site.url, json={"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                                                   "params": {"uri": f"{uri}?page=2"}},
                                   headers={"Authorization": f"Bearer {site.token('bob')}",
                                            "Accept": "application/json, text/event-stream",
                                            "Mcp-Session-Id": session, "Mcp-Protocol-Version": HANDSHAKE})
    assert "x" * 100 not in json.dumps(parse(response)), response.status_code


# --- requestState (back channels) -----------------------------------------------------------------


async def test_b_cannot_answer_a_request_state_of_a_with_forged_session_header_or_client_name(site: Site) -> None:
    """Attacks '`requestState` ... is refused with -32602 when ... another principal sends it'."""
    forged_answer = types.CreateMessageResult(role="assistant", model="m",
                                              content=types.TextContent(type="text", text="forged-by-bob"))
    async with client(site.url, token=site.token("alice"), sampling_callback=ignore_sampling) as alice:
        first = await alice.session.call_tool("asker__whoami_sampling", {"tag": "alice-1"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        (key,) = first.input_requests or {}
        answered = []
        for forged in [None, *forged_keys("alice")]:
            headers = {"Mcp-Session-Id": forged} if forged is not None else {}
            async with client(site.url, token=site.token("bob"), headers=headers,
                              sampling_callback=ignore_sampling) as bob:
                try:
                    done = await bob.session.call_tool("asker__whoami_sampling", {"tag": "alice-1"},
                                                       input_responses={key: forged_answer},
                                                       request_state=first.request_state, allow_input_required=True)
                    answered.append((forged, done))
                except MCPError as error:
                    assert error.code == types.INVALID_PARAMS, (forged, error)
        assert answered == []
        mine = types.CreateMessageResult(role="assistant", model="m",
                                         content=types.TextContent(type="text", text="mine"))
        with anyio.fail_after(30):
            done = await alice.session.call_tool("asker__whoami_sampling", {"tag": "alice-1"},
                                                 input_responses={key: mine}, request_state=first.request_state,
                                                 allow_input_required=True)
    assert isinstance(done, types.CallToolResult) and text(done) == "mine"



async def test_one_users_abandoned_sessions_never_close_another_users_session(site: Site) -> None:
    """Attacks 'one principal's abandoned sessions never close another principal's session' (docs/integrity.md)."""
    async with httpx2.AsyncClient(timeout=60, limits=httpx2.Limits(max_connections=8)) as http:
        alice = await handshake(http, site.url, site.token("alice"))
        bob_token = site.token("bob")
        limit = anyio.Semaphore(8)

        async def abandon() -> None:
            async with limit:
                await handshake(http, site.url, bob_token)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(1_001):  # one past bob's cap of 1,000
                    tg.start_soon(abandon)
        response = await http.post(site.url, json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                                   headers={"Authorization": f"Bearer {site.token('alice')}",
                                            "Accept": "application/json, text/event-stream",
                                            "Mcp-Session-Id": alice, "Mcp-Protocol-Version": HANDSHAKE})
    assert response.status_code == 200 and "result" in parse(response)


async def test_the_console_takes_a_users_token_in_the_header_or_its_sign_in_cookie(site: Site) -> None:
    """`/ui` is behind the protected resource like `/mcp`: a valid access token opens it, carried in the header or
    in the cookie the sign-in form sets; a forged one, or none, does not (docs/console.md)."""
    console = site.url.removesuffix("/mcp") + "/ui"
    token = site.token("alice")
    async with httpx2.AsyncClient(timeout=30) as http:
        assert (await http.get(console, headers={"Authorization": f"Bearer {token}"})).status_code == 200
        assert (await http.get(console, headers={"Cookie": f"toolbridge_console={token}"})).status_code == 200
        assert (await http.get(console, headers={"Cookie": f"toolbridge_console={token}x"})).status_code == 401
        assert (await http.get(console)).status_code == 401
        status = site.url.removesuffix("/mcp") + "/status"
        assert (await http.get(status, headers={"Cookie": f"toolbridge_console={token}"})).status_code == 401
