"""Three features attacked from their documentation only (docs/console.md, docs/configuration.md "Limits" and
"Tool overrides", docs/security.md): the console at `/ui` (who gets in, CSRF on Approve, hostile upstream text
rendered inert, no secret on a page, the CSP header), `per: principal` limits (no client-chosen value escapes
them; a refused call never reaches the upstream) and hidden parameters (no caller sets one; its value is never
shown). Plain httpx against the HTML: the checks read the raw markup a browser would parse."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port
from mcp import MCPError
from rt import ISSUER, client, meta, oauth_issuer, post, serve_http, text, tool, upstream, write_config
from servers.jwt_issuer import Issuer

pytestmark = pytest.mark.anyio

TOKEN = "console-rt-token-8e2b61d0c4"
SECRET_ENV = "env-secret-5a0c93e1f7b2"
SECRET_HEADER = "hdr-secret-b71d04e9a3c6"
HIDDEN = "hidden-workspace-W9f3e1a7"
SCRIPT = "<script>window.pwned=1</script>"
IMG = '"><img src=x onerror=alert(1)>'
JS = "javascript:alert(1)"
HOSTILE = f"{SCRIPT}{IMG}<a href=\"{JS}\">click</a>"
LIMIT = 3
REQUIRED_TEXT = {"inputSchema": {"type": "object", "required": ["text"],
                                 "properties": {"workspace": {"type": "string"}, "text": {"type": "string"}}}}


def calls(log: Path) -> list[list[Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# --- the gateways ----------------------------------------------------------------------------------


@dataclass
class Shared:
    """A gateway behind one `--auth-token`: hostile, secret-holding and overridden upstreams."""

    base: str
    acme_calls: Path
    audit: Path

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    directory = tmp_path_factory.mktemp("console")
    config = directory / "config"
    acme_calls = directory / "acme-calls.jsonl"
    markup_tool = {**tool("marked", HOSTILE, note={"type": "string", "description": HOSTILE, "title": IMG}),
                   "annotations": {"title": HOSTILE}, "title": IMG,
                   "icons": [{"src": JS}], "_meta": {"ui": {"resourceUri": JS}}}
    upstreams = {
        "hostile": {**upstream("hostile", tools=[markup_tool, tool(f"x{SCRIPT}", HOSTILE),
                                                 tool("victim", "Add two numbers."), tool("mutate")]),
                    "pin": True},
        "secret": {**upstream("secret", tools=[tool("echo")]), "env": {"API_TOKEN": SECRET_ENV}},
        "remote": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": f"Bearer {SECRET_HEADER}"},
                   "connect_timeout": 2},
        "broken": {"command": sys.executable, "connect_timeout": 5,
                   "args": ["-c", f"import sys; sys.stderr.write({HOSTILE!r} + {SECRET_ENV!r}); sys.exit(3)"],
                   "env": {"API_TOKEN": SECRET_ENV}},
        "acme": {**upstream("acme", calls_log=str(acme_calls),
                            tools=[tool("post_message", "Post a message.", workspace={"type": "string"},
                                        text={"type": "string"}) | REQUIRED_TEXT]),
                 "overrides": {"post_message": {"name": "post", "hide": ["workspace"],
                                                "defaults": {"workspace": HIDDEN}}}},
    }
    toolsets = {"core": ["acme__post", "hostile__*", "secret__*"], "startup_wait": 10,
                "profiles": {"default": {"toolsets": ["all"]}},
                "audit": {"path": str(directory / "audit.jsonl"), "arguments": "full"}}
    write_config(config, upstreams, toolsets)
    async with serve_http(config, free_port(), "--auth-token", TOKEN, ready=(200, 401, 503)) as base:
        site = Shared(base, acme_calls, directory / "audit.jsonl")
        async with client(site.url, headers=site.auth) as warm:
            with anyio.fail_after(30):
                while "acme__post" not in {t.name for t in (await warm.list_tools()).tools}:
                    await anyio.sleep(0.2)
            await warm.call_tool("acme__post", {"text": "warm"})
        yield site


@dataclass
class Guarded:
    """A gateway on OAuth with a `per: principal` limit of LIMIT calls a minute on data__echo."""

    url: str
    base: str
    issuer: Issuer
    data_calls: Path

    def token(self, user: str) -> str:
        return self.issuer.token(sub=user, groups=["admins"], scope="mcp")

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(user)}"}


@pytest.fixture(scope="module")
async def guarded(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Guarded]:
    directory = tmp_path_factory.mktemp("limits")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    issuer, auth = oauth_issuer(directory, url)
    data_calls = directory / "data-calls.jsonl"
    upstreams = {
        "data": upstream("data", calls_log=str(data_calls), tools=[tool("echo", tag={"type": "string"})]),
        "rug": {**upstream("rug", tools=[tool("victim", "Add two numbers."), tool("mutate")]), "pin": True},
        "outsider": {**upstream("outsider", tools=[tool("victim", "Add two numbers."), tool("mutate")]), "pin": True},
    }
    toolsets = {"core": ["data__echo", "rug__mutate", "outsider__mutate"], "startup_wait": 30,
                "profiles": {"default": {"toolsets": ["all"]}},
                "limits": {"per-user": {"per": "principal", "tool": "data__echo", "calls_per_minute": LIMIT}},
                "auth": {**auth, "profile_claim": "groups", "profiles": {"admins": "default"}}}
    write_config(directory / "config", upstreams, toolsets)
    async with serve_http(directory / "config", port, ready=(200,)) as base:
        site = Guarded(url, base, issuer, data_calls)
        async with client(url, token=site.token("setup")) as c:
            assert text(await c.call_tool("rug__mutate", {})) == "mutated"
            assert text(await c.call_tool("outsider__mutate", {})) == "mutated"
        async with httpx2.AsyncClient(headers=site.auth("setup")) as http:
            with anyio.fail_after(20):
                while {c["server"] for c in (await http.get(f"{base}/status")).json()["tool_changes"]} \
                        < {"rug", "outsider"}:
                    await anyio.sleep(0.2)
        yield site


# --- markup checks ---------------------------------------------------------------------------------


URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "poster", "xlink:href", "srcdoc", "background"}


class Markup(HTMLParser):
    """Every tag a browser would build from the page, with its attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def active(html: str) -> list[str]:
    """What in the page could run: an inline or foreign script, an event handler, a javascript: URL, an img
    pointing at `x`."""
    parser = Markup()
    parser.feed(html)
    found = []
    for tag, attrs in parser.tags:
        values = dict(attrs)
        if tag == "script" and not (values.get("src") or "").startswith("/ui"):
            found.append(f"<script {attrs}>")
        if tag == "img":
            found.append(f"<img {attrs}>")
        for name, value in attrs:
            if name.startswith("on"):
                found.append(f"<{tag} {name}={value!r}>")
            if name in URL_ATTRIBUTES and value and re.sub(r"\s", "", value).lower().startswith("javascript:"):
                found.append(f"<{tag} {name}={value!r}>")
    return found


CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
PAGES = ("/ui", "/ui/", "/ui/fleet.json", "/ui/profiles", "/ui/audit", "/ui/search?profile=default&q=victim",
         "/ui/search?profile=default&q=post+message+workspace",
         "/ui/servers/hostile", "/ui/servers/secret", "/ui/servers/remote", "/ui/servers/broken",
         "/ui/servers/acme")
REFLECTED = (f"/ui/search?profile=default&q={SCRIPT}{IMG}", f"/ui/search?profile={IMG}&q=x",
             f"/ui/audit?server={IMG}&tool={SCRIPT}&principal={JS}", f"/ui/servers/{IMG}")


EVERY_PAGE = (*PAGES, *REFLECTED, "/ui/login", "/ui/nowhere")


# --- 1. the console --------------------------------------------------------------------------------


async def test_every_console_page_is_refused_without_the_token_or_with_a_wrong_one(shared: Shared) -> None:
    wrong = {"none": {}, "header": {"Authorization": "Bearer wrong-token"},
             "prefix": {"Authorization": f"Bearer {TOKEN[:-1]}"}, "longer": {"Authorization": f"Bearer {TOKEN}x"},
             "basic": {"Authorization": f"Basic {TOKEN}"}, "cookie": {"Cookie": "toolbridge_console=wrong"},
             "empty cookie": {"Cookie": "toolbridge_console="},
             "wrong header beats right cookie": {"Authorization": "Bearer wrong",
                                                 "Cookie": f"toolbridge_console={TOKEN}"}}
    served = []
    async with httpx2.AsyncClient() as http:
        for path in PAGES:
            for label, headers in wrong.items():
                response = await http.get(f"{shared.base}{path}", headers=headers)
                if response.status_code != 401:
                    served.append((path, label, response.status_code))
                if response.status_code == 200 and "victim" in response.text:
                    served.append((path, label, "content"))
            assert (await http.get(f"{shared.base}{path}", headers=shared.auth)).status_code == 200, path
    assert served == []


async def test_the_sign_in_cookie_is_not_honoured_on_mcp_status_or_metrics(shared: Shared) -> None:
    cookie = {"Cookie": f"toolbridge_console={TOKEN}"}
    async with httpx2.AsyncClient() as http:
        assert (await http.get(f"{shared.base}/ui", headers=cookie)).status_code == 200
        for path in ("/status", "/metrics"):
            assert (await http.get(f"{shared.base}{path}", headers=cookie)).status_code == 401, path
        status, _ = await post(http, shared.url, "tools/list", {}, headers=cookie)
        assert status == 401


async def test_the_sign_in_page_shows_nothing_but_the_form(shared: Shared) -> None:
    async with httpx2.AsyncClient() as http:
        page = (await http.get(f"{shared.base}/ui/login")).text
    for leaked in ("hostile", "victim", "acme", "secret", TOKEN):
        assert leaked not in page


def strict(policy: str | None) -> bool:
    """The documented policy, or one stricter still (`default-src 'none'` alone: nothing loads)."""
    return policy in (CSP, "default-src 'none'")


async def test_every_console_response_carries_a_strict_csp(shared: Shared) -> None:
    missing = []
    async with httpx2.AsyncClient() as http:
        for path in EVERY_PAGE:
            for headers in ({}, shared.auth, {"Cookie": "toolbridge_console=wrong"}):
                response = await http.get(f"{shared.base}{path}", headers=headers)
                if not strict(response.headers.get("content-security-policy")):
                    missing.append((path, headers, response.status_code))
        for headers in ({}, shared.auth):
            response = await http.post(f"{shared.base}/ui/servers/hostile/approve", headers=headers,
                                       data={"tool": "victim"})
            if not strict(response.headers.get("content-security-policy")):
                missing.append(("approve POST", headers, response.status_code))
    assert missing == []


async def test_every_console_response_carries_the_documented_hardening_headers(shared: Shared) -> None:
    documented = {"x-content-type-options": "nosniff", "referrer-policy": "same-origin", "cache-control": "no-store"}
    missing = []
    async with httpx2.AsyncClient() as http:
        for path in EVERY_PAGE:
            for headers in ({}, shared.auth):
                response = await http.get(f"{shared.base}{path}", headers=headers)
                wrong = [name for name, value in documented.items() if response.headers.get(name) != value]
                if wrong:
                    missing.append((path, bool(headers), response.status_code, wrong))
    assert missing == []


async def test_the_sign_in_cookie_is_http_only_same_site_strict_and_scoped_to_ui(shared: Shared) -> None:
    async with httpx2.AsyncClient() as http:
        response = await http.post(f"{shared.base}/ui/login", data={"token": TOKEN})
        cookie = response.headers["set-cookie"]
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "path=/ui", "samesite=strict"} <= attributes, cookie
        assert response.headers.get("location", "").startswith("/"), response.headers
        foreign = await http.post(f"{shared.base}/ui/login", data={"token": TOKEN},
                                  headers={"Origin": "http://evil.example"})
        assert foreign.status_code >= 400 and "set-cookie" not in foreign.headers
        jar = {"Cookie": f"toolbridge_console={TOKEN}"}
        for path in ("/ui/%2e%2e/status", "/ui/%2e%2e/metrics", "/ui/..%2fstatus", "/ui/static/%2e%2e/%2e%2e/status"):
            response = await http.get(f"{shared.base}{path}", headers=jar)
            assert "tool_changes" not in response.text and "toolbridge_" not in response.text, path


async def test_hostile_upstream_text_renders_inert_on_every_page(shared: Shared) -> None:
    runnable = {}
    async with httpx2.AsyncClient(headers=shared.auth) as http:
        for path in EVERY_PAGE:
            response = await http.get(f"{shared.base}{path}")
            if path == "/ui/fleet.json":
                continue  # JSON, written with textContent; checked as a content type below
            if found := active(response.text):
                runnable[path] = found
        fleet = await http.get(f"{shared.base}/ui/fleet.json")
        assert fleet.headers["content-type"].startswith("application/json")
        hostile_page = (await http.get(f"{shared.base}/ui/servers/hostile")).text
    assert runnable == {}
    assert "&lt;script&gt;" in hostile_page  # the description is there, as text


async def test_the_fleet_script_writes_text_never_markup(shared: Shared) -> None:
    """fleet.json carries upstream text raw (it is JSON); the page's script must write it as text."""
    async with httpx2.AsyncClient(headers=shared.auth) as http:
        page = (await http.get(f"{shared.base}/ui")).text
        sources = [value for tag, attrs in (lambda m: (m.feed(page), m.tags)[1])(Markup()) if tag == "script"
                   for name, value in attrs if name == "src"]
        assert sources
        for source in sources:
            script = (await http.get(f"{shared.base}{source}")).text
            assert "textContent" in script
            for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
                assert sink not in script, (source, sink)


async def test_no_configured_secret_or_the_sign_in_token_shows_on_any_page(shared: Shared) -> None:
    leaks = []
    async with httpx2.AsyncClient(headers=shared.auth) as http:
        for path in EVERY_PAGE:
            body = (await http.get(f"{shared.base}{path}")).text
            leaks += [(path, secret) for secret in (SECRET_ENV, SECRET_HEADER, TOKEN, HIDDEN) if secret in body]
    assert leaks == []


async def test_approve_without_csrf_or_from_a_foreign_origin_does_nothing(shared: Shared) -> None:
    approve = f"{shared.base}/ui/servers/hostile/approve"

    async def pending(http: httpx2.AsyncClient) -> list[str]:
        return [c["tool"] for c in (await http.get(f"{shared.base}/status")).json()["tool_changes"]
                if c["server"] == "hostile"]

    async with httpx2.AsyncClient(headers=shared.auth) as http:
        async with client(shared.url, headers=shared.auth) as c:
            await c.call_tool("hostile__mutate", {})
        with anyio.fail_after(20):
            while "victim" not in await pending(http):
                await anyio.sleep(0.2)
        page = (await http.get(f"{shared.base}/ui/servers/hostile")).text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page) or re.search(r'value="([^"]+)" name="csrf"', page)
        assert csrf, "the server page offers an Approve form with a CSRF token"
        token = csrf.group(1)
        cookie = {"Cookie": f"toolbridge_console={TOKEN}"}
        attempts = {
            "no csrf": ({}, {"tool": "victim"}),
            "empty csrf": ({}, {"tool": "victim", "csrf": ""}),
            "wrong csrf": ({}, {"tool": "victim", "csrf": token[:-1] + ("0" if token[-1] != "0" else "1")}),
            "foreign origin": ({"Origin": "http://evil.example"}, {"tool": "victim", "csrf": token}),
            "null origin": ({"Origin": "null"}, {"tool": "victim", "csrf": token}),
            "cookie, foreign origin": ({**cookie, "Authorization": "", "Origin": "http://evil.example"},
                                       {"tool": "victim", "csrf": token}),
            "csrf in query": ({}, None),
        }
        statuses = {}
        for label, (headers, form) in attempts.items():
            if form is None:
                response = await http.post(f"{approve}?tool=victim&csrf={token}")
            else:
                response = await http.post(approve, headers=headers, data=form)
            statuses[label] = response.status_code
            assert "victim" in await pending(http), f"{label} approved: {response.status_code} {response.text[:200]}"
        get = await http.get(f"{approve}?tool=victim&csrf={token}")
        assert "victim" in await pending(http), f"GET approved: {get.status_code}"
    assert all(code >= 400 for label, code in statuses.items() if label != "csrf in query"), statuses


async def test_oauth_console_refuses_forged_tokens_and_serves_a_valid_one(guarded: Guarded) -> None:
    forged = Issuer("https://evil.example", audience=guarded.url).token(sub="alice", groups=["admins"], scope="mcp")
    other_key = Issuer(ISSUER, audience=guarded.url).token(sub="alice", groups=["admins"], scope="mcp")
    async with httpx2.AsyncClient() as http:
        for path in ("/ui", "/ui/servers/rug", "/ui/profiles", "/ui/audit", "/ui/fleet.json"):
            for bad in (None, forged, other_key, "not-a-jwt"):
                headers = {} if bad is None else {"Authorization": f"Bearer {bad}"}
                assert (await http.get(f"{guarded.base}{path}", headers=headers)).status_code == 401, path
                if bad:
                    cookie = {"Cookie": f"toolbridge_console={bad}"}
                    assert (await http.get(f"{guarded.base}{path}", headers=cookie)).status_code == 401, path
            good = {"Cookie": f"toolbridge_console={guarded.token('alice')}"}
            assert (await http.get(f"{guarded.base}{path}", headers=good)).status_code == 200, path
        unscoped = guarded.issuer.token(sub="mallory", groups=["admins"], scope="other")
        for headers in ({"Authorization": f"Bearer {unscoped}"}, {"Cookie": f"toolbridge_console={unscoped}"}):
            for path in ("/ui", "/ui/servers/rug", "/ui/audit"):
                assert (await http.get(f"{guarded.base}{path}", headers=headers)).status_code in (401, 403), path
        for path in ("/status", "/metrics"):
            good = {"Cookie": f"toolbridge_console={guarded.token('alice')}"}
            assert (await http.get(f"{guarded.base}{path}", headers=good)).status_code == 401, path


async def test_approve_with_another_users_csrf_token_does_nothing(guarded: Guarded) -> None:
    approve = f"{guarded.base}/ui/servers/rug/approve"

    async def pending(http: httpx2.AsyncClient) -> list[str]:
        return [c["tool"] for c in (await http.get(f"{guarded.base}/status")).json()["tool_changes"]
                if c["server"] == "rug"]

    async with httpx2.AsyncClient(headers=guarded.auth("alice")) as alice, \
            httpx2.AsyncClient(headers=guarded.auth("bob")) as bob:
        page = (await alice.get(f"{guarded.base}/ui/servers/rug")).text
        match = re.search(r'name="csrf" value="([^"]+)"', page) or re.search(r'value="([^"]+)" name="csrf"', page)
        assert match and "victim" in await pending(alice)
        response = await bob.post(approve, data={"tool": "victim", "csrf": match.group(1)})
        assert response.status_code >= 400 and "victim" in await pending(bob), response.status_code


async def test_a_user_the_endpoint_refuses_cannot_use_the_console_or_approve(guarded: Guarded) -> None:
    """'Whoever passes may also approve: with OAuth, that is every user the endpoint accepts' — and
    docs/oauth.md: 'a token whose claim maps to none is 403'."""
    mallory = {"Authorization": f"Bearer {guarded.issuer.token(sub='mallory', groups=['nobody'], scope='mcp')}"}
    async with httpx2.AsyncClient(headers=mallory) as http, \
            httpx2.AsyncClient(headers=guarded.auth("alice")) as alice:
        status, body = await post(http, guarded.url, "tools/list", {})
        assert status == 403, body  # the endpoint does not accept mallory
        page = (await http.get(f"{guarded.base}/ui/servers/outsider")).text
        match = re.search(r'name="csrf" value="([^"]+)"', page)
        if match:
            await http.post(f"{guarded.base}/ui/servers/outsider/approve",
                            data={"tool": "victim", "csrf": match.group(1)})
        still = [c["tool"] for c in (await alice.get(f"{guarded.base}/status")).json()["tool_changes"]
                 if c["server"] == "outsider"]
        assert "victim" in still, "mallory approved outsider's changed tool"
        for path in ("/ui", "/ui/audit", "/ui/servers/outsider", "/status", "/metrics"):
            assert (await http.get(f"{guarded.base}{path}")).status_code in (401, 403), path


# --- 2. limits -------------------------------------------------------------------------------------


def reached(guarded: Guarded, tag: str) -> int:
    return sum(1 for name, arguments in calls(guarded.data_calls) if name == "echo" and arguments.get("tag") == tag)


async def spend(guarded: Guarded, user: str, tag: str, mode: str = "auto") -> None:
    async with client(guarded.url, token=guarded.token(user), mode=mode) as c:
        for _ in range(LIMIT):
            assert not (await c.call_tool("data__echo", {"tag": tag})).is_error
    assert reached(guarded, tag) == LIMIT


def refused(status: int, body: dict[str, Any]) -> bool:
    result = body.get("result") or {}
    return status >= 400 or "error" in body or bool(result.get("isError"))


async def test_a_principal_limit_cannot_be_escaped_by_client_name_session_or_meta(guarded: Guarded) -> None:
    user = f"limit-{uuid.uuid4().hex[:6]}"
    await spend(guarded, user, user)
    async with httpx2.AsyncClient(headers=guarded.auth(user), timeout=30) as http:
        forged = {
            "client name": ({"name": "echo", "arguments": {"tag": user}}, {"name": "other-client"}),
            "session id": ({"name": "echo", "arguments": {"tag": user}},
                           {"headers": {"Mcp-Session-Id": uuid.uuid4().hex}}),
            "meta": ({"name": "echo", "arguments": {"tag": user},
                      "_meta": {"principal": "bob", "io.modelcontextprotocol/clientInfo": {"name": "x", "version": "9"},
                                "progressToken": "p1", "traceparent": f"00-{uuid.uuid4().hex}-{'1' * 16}-01"}},
                     {}),
        }
        answers = {}
        for label, (params, options) in forged.items():
            answers[label] = await post(http, guarded.url, "tools/call", {**params, "name": "data__echo"}, **options)
    assert all(refused(*answer) for answer in answers.values()), answers
    assert reached(guarded, user) == LIMIT


async def test_a_principal_limit_cannot_be_escaped_through_tool_call(guarded: Guarded) -> None:
    user = f"limit-{uuid.uuid4().hex[:6]}"
    await spend(guarded, user, user)
    async with client(guarded.url, token=guarded.token(user), name="another-ide") as c:
        result = await c.call_tool("tool_call", {"name": "data__echo", "arguments": {"tag": user}})
    assert result.is_error and "per-user" in text(result), text(result)
    assert reached(guarded, user) == LIMIT


@pytest.mark.parametrize(("first", "then"), [("auto", "legacy"), ("legacy", "auto")])
async def test_a_principal_limit_holds_across_protocol_eras(guarded: Guarded, first: str, then: str) -> None:
    user = f"limit-{uuid.uuid4().hex[:6]}"
    await spend(guarded, user, user, mode=first)
    async with client(guarded.url, token=guarded.token(user), mode=then, name="fresh") as c:
        direct = await c.call_tool("data__echo", {"tag": user})
        wrapped = await c.call_tool("tool_call", {"name": "data__echo", "arguments": {"tag": user}})
    assert direct.is_error and wrapped.is_error, (text(direct), text(wrapped))
    assert "limit 'per-user' reached" in text(direct)
    assert reached(guarded, user) == LIMIT


async def test_a_principal_limit_holds_under_a_concurrent_burst(guarded: Guarded) -> None:
    """Sixteen calls at once from one user over separate connections: the check and the count are one step."""
    user = f"limit-{uuid.uuid4().hex[:6]}"
    outcomes: list[bool] = []

    async def one() -> None:
        async with httpx2.AsyncClient(headers=guarded.auth(user), timeout=30) as http:
            status, body = await post(http, guarded.url, "tools/call",
                                      {"name": "data__echo", "arguments": {"tag": user}}, name=uuid.uuid4().hex)
            outcomes.append(refused(status, body))

    async with anyio.create_task_group() as group:
        for _ in range(16):
            group.start_soon(one)
    assert reached(guarded, user) == LIMIT and outcomes.count(False) == LIMIT, outcomes


async def test_a_principal_limit_cannot_be_escaped_by_spelling_the_tool_another_way(guarded: Guarded) -> None:
    """The limit selects `data__echo` by name; no other spelling that still reaches the tool escapes it."""
    user = f"limit-{uuid.uuid4().hex[:6]}"
    await spend(guarded, user, user)
    spellings = ["DATA__ECHO", "Data__Echo", "data__echo ", " data__echo", "data__echo\u200b", "data__ech\u043e",
                 "echo", "data.echo", "data/echo", "data__echo\x00", "data___echo"]
    async with client(guarded.url, token=guarded.token(user)) as c:
        for spelling in spellings:
            name = spelling.encode().decode("unicode_escape")
            wrapped = {"name": name, "arguments": {"tag": user}}
            for tool_name, arguments in ((name, {"tag": user}), ("tool_call", wrapped)):
                with contextlib.suppress(MCPError):
                    await c.call_tool(tool_name, arguments)
    async with httpx2.AsyncClient(headers=guarded.auth(user), timeout=30) as http:
        batch = [{"jsonrpc": "2.0", "id": n, "method": "tools/call",
                  "params": {"name": "data__echo", "arguments": {"tag": user}, "_meta": meta()}}
                 for n in range(4)]
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                   "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "data__echo"}
        await http.post(guarded.url, json=batch, headers=headers)
    assert reached(guarded, user) == LIMIT


async def test_status_and_metrics_show_a_limited_user_only_as_a_digest(guarded: Guarded) -> None:
    """'a user appears there as `user:` and a digest of their issuer and subject, since every token holder
    of an OAuth endpoint may read `/status`'."""
    user = f"limit-{uuid.uuid4().hex[:6]}"
    await spend(guarded, user, user)
    async with httpx2.AsyncClient(headers=guarded.auth("someone-else")) as http:
        status = (await http.get(f"{guarded.base}/status")).json()
        metrics = (await http.get(f"{guarded.base}/metrics")).text
    limit = next(entry for entry in status["limits"] if entry["limit"] == "per-user")
    assert "user:" in json.dumps(limit)
    assert user not in json.dumps(status) and user not in metrics


async def test_another_principal_is_not_held_by_a_spent_limit(guarded: Guarded) -> None:
    """The control: the limit is per principal, so the attacks above could have failed."""
    spent, other = f"limit-{uuid.uuid4().hex[:6]}", f"limit-{uuid.uuid4().hex[:6]}"
    await spend(guarded, spent, spent)
    async with client(guarded.url, token=guarded.token(other)) as c:
        assert not (await c.call_tool("data__echo", {"tag": other})).is_error
    assert reached(guarded, other) == 1


# --- 3. overrides ----------------------------------------------------------------------------------


async def attempt(c: Any, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """(refused, what the caller was told)."""
    try:
        result = await c.call_tool(name, arguments)
    except MCPError as error:
        return True, json.dumps({"message": str(error), "data": getattr(error, "data", None)}, default=str)
    return result.is_error, text(result)


HIDDEN_VALUES: list[Any] = ["evil", None, 7, 0, False, True, [], ["evil"], {}, {"$ref": "x"}, "", HIDDEN]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_hidden_parameter_cannot_be_set_by_a_caller(shared: Shared, mode: str) -> None:
    tag = f"hide-{mode}-{uuid.uuid4().hex[:6]}"
    told = []
    async with client(shared.url, headers=shared.auth, mode=mode) as c:
        for value in HIDDEN_VALUES:
            arguments = {"text": tag, "workspace": value}
            for name, args in (("acme__post", arguments),
                               ("tool_call", {"name": "acme__post", "arguments": arguments})):
                was_refused, message = await attempt(c, name, args)
                told.append(message)
                assert was_refused, f"{name} with workspace={value!r} was served: {message}"
                assert "workspace" in message, message
        assert not (await c.call_tool("acme__post", {"text": tag})).is_error
    sent = [arguments for name, arguments in calls(shared.acme_calls) if arguments.get("text") == tag]
    assert sent == [{"text": tag, "workspace": HIDDEN}]  # only the honest call, with the operator's value
    assert not [m for m in told if HIDDEN in m]


async def test_a_hidden_parameter_cannot_be_set_by_a_raw_request(shared: Shared) -> None:
    tag = f"hide-raw-{uuid.uuid4().hex[:6]}"
    bodies = [
        {"name": "acme__post", "arguments": {"text": tag, "workspace": "evil"}},
        {"name": "acme__post", "arguments": {"text": tag, "workspace": "evil", "_meta": {}}},
        {"name": "tool_call", "arguments": {"name": "acme__post", "arguments": {"text": tag, "workspace": "evil"}}},
        {"name": "tool_call", "arguments": {"name": "acme__post_message", "arguments": {"text": tag,
                                                                                        "workspace": "evil"}}},
        {"name": "acme__post_message", "arguments": {"text": tag, "workspace": "evil"}},
        {"name": "tool_call", "arguments": {"name": "acme__post",
                                            "arguments": json.dumps({"text": tag, "workspace": "evil"})}},
    ]
    stray = [  # keys beside `arguments` may be ignored; what matters is what reaches the upstream
        {"name": "tool_call", "arguments": {"name": "acme__post", "text": tag, "workspace": "evil"}},
        {"name": "tool_call", "arguments": {"name": "acme__post", "arguments": {"text": tag},
                                            "workspace": "evil"}},
    ]
    async with httpx2.AsyncClient(headers=shared.auth, timeout=30) as http:
        for params in bodies:
            status, body = await post(http, shared.url, "tools/call", params)
            assert refused(status, body), (params, body)
        for params in stray:
            await post(http, shared.url, "tools/call", params)
        # the same key twice in one JSON object: whichever parser wins, `workspace` is set
        raw = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"acme__post",'
               f'"arguments":{{"text":"{tag}","workspace":"evil"}},"arguments":{{"text":"{tag}"}},'
               '"_meta":' + json.dumps({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                        "io.modelcontextprotocol/clientInfo": {"name": "ide", "version": "1"},
                                        "io.modelcontextprotocol/clientCapabilities": {}}) + '}}')
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                   "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "acme__post"}
        await http.post(shared.url, content=raw, headers=headers)
    sent = [arguments for name, arguments in calls(shared.acme_calls) if arguments.get("text") == tag]
    assert all(arguments.get("workspace") == HIDDEN for arguments in sent), sent


async def test_the_hidden_value_never_shows_in_listings_descriptions_errors_or_status(shared: Shared) -> None:
    async with client(shared.url, headers=shared.auth) as c:
        listed = [t.model_dump(mode="json", by_alias=True) for t in (await c.list_tools()).tools]
        post_tool = next(t for t in listed if t["name"] == "acme__post")
        described = text(await c.call_tool("tool_describe", {"names": ["acme__post", "acme__post_message"]}))
        searched = text(await c.call_tool("tool_search", {"query": "post message workspace"}))
        _, error = await attempt(c, "acme__post", {"text": 5, "workspace": "evil"})
        _, missing = await attempt(c, "acme__post", {})
    async with httpx2.AsyncClient(headers=shared.auth) as http:
        status = (await http.get(f"{shared.base}/status")).text
        metrics = (await http.get(f"{shared.base}/metrics")).text
    assert "workspace" not in json.dumps(post_tool["inputSchema"])
    shown = {"tools/list": json.dumps(listed), "tool_describe": described, "tool_search": searched,
             "error": error, "missing": missing, "/status": status, "/metrics": metrics}
    assert [where for where, body in shown.items() if HIDDEN in body] == []


async def test_the_hidden_value_is_not_logged_in_the_audit_log(shared: Shared) -> None:
    """'toolbridge never shows a hidden value to clients, logs it, or puts it in its errors', with
    `audit: {arguments: full}`."""
    async with client(shared.url, headers=shared.auth) as c:
        assert not (await c.call_tool("acme__post", {"text": "audited"})).is_error
    with anyio.fail_after(10):
        while not shared.audit.exists() or "audited" not in shared.audit.read_text():
            await anyio.sleep(0.2)
    records = [json.loads(line) for line in shared.audit.read_text().splitlines()]
    for record in records:  # a refused caller's own (guessed) value may be recorded as the caller sent it
        if record.get("outcome") == "refused" and isinstance(record.get("arguments"), dict):
            record["arguments"].pop("workspace", None)
    assert [record for record in records if HIDDEN in json.dumps(record)] == []
