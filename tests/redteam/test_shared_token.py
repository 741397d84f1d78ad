"""One `toolbridge serve --transport http --auth-token` shared by several clients: the front door (token,
Host, Origin, binding), what clients sharing the token may not take from each other (tasks, links in
another profile), what a hostile upstream may not forge or leak (its error text, a configured secret), the
files that can hold secrets, and a pinned server's changed tool (docs/security.md, docs/integrity.md)."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port
from mcp import MCPError, types
from rt import SERVERS, client, post, serve_http, text, tool, upstream, write_config
from servers.tasks_server import TASKS, CreatedTask, TaskClient

pytestmark = pytest.mark.anyio

TOKEN = "team-token-4f9a2c7e1b"
SECRET = "hdr-secret-7c1e9b40d2a8"
SIZE, MAX_CHARS = 2_500, 1_000


@dataclass
class Site:
    base: str
    config: Path
    rug_calls: Path

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    directory = tmp_path_factory.mktemp("token")
    config = directory / "config"
    rug_calls = directory / "rug-calls.jsonl"
    upstreams = {
        "data": upstream("data", tools=[tool("big", size={"type": "integer"}), tool("echo")]),
        "jobs": {"command": sys.executable, "args": [str(SERVERS / "tasks_server.py")], "connect_timeout": 30},
        "forger": {"command": sys.executable, "args": [str(SERVERS / "forger.py")], "env": {"API_TOKEN": SECRET},
                   "connect_timeout": 30},
        "rug": {**upstream("rug", calls_log=str(rug_calls), tools=[tool("victim", "Add two numbers."), tool("mutate")]),
                "pin": True},
    }
    toolsets = {"core": ["data__big", "jobs__forever", "forger__*", "rug__*"],
                "profiles": {"default": {"toolsets": ["all"]}, "narrow": {"toolsets": ["data"]}},
                "large_results": {"max_chars": MAX_CHARS}, "startup_wait": 30,
                "audit": {"path": "logs/audit.jsonl", "arguments": "full"}}
    write_config(config, upstreams, toolsets)
    async with serve_http(config, free_port(), "--auth-token", TOKEN, ready=(200, 401)) as base:
        site = Site(base, config, rug_calls)
        async with client(site.url, headers=site.auth) as warm:
            assert "rug__victim" in {t.name for t in (await warm.list_tools()).tools}
        yield site


# --- the front door -------------------------------------------------------------------------------


async def test_a_request_without_the_shared_token_is_refused(site: Site) -> None:
    """Attacks 'HTTP is closed by default ... needs the bearer token when one is set'."""
    async with httpx2.AsyncClient(timeout=30) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {TOKEN}x"},
                        {"Authorization": f"Bearer {TOKEN[:-1]}"}, {"Authorization": TOKEN},
                        {"Authorization": f"Basic {TOKEN}"}, {"X-Auth-Token": TOKEN}):
            status, _ = await post(http, site.url, "tools/list", {}, headers=headers)
            assert status == 401, headers
        status, _ = await post(http, f"{site.url}?token={TOKEN}", "tools/list", {})
        assert status == 401
        assert (await http.get(f"{site.base}/status")).status_code == 401


async def test_a_forged_host_or_origin_is_refused(site: Site) -> None:
    """Attacks 'It binds to 127.0.0.1, checks Host and Origin' (DNS rebinding)."""
    async with httpx2.AsyncClient(timeout=30) as http:
        for headers in ({"Host": "evil.example"}, {"Host": "evil.example:8765"},
                        {"Origin": "http://evil.example"}, {"Origin": "null"}):
            status, body = await post(http, site.url, "tools/list", {}, headers={**site.auth, **headers})
            assert status in (400, 403, 421), (headers, status, body)


async def test_a_non_loopback_bind_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    """Attacks 'It refuses a non-loopback --host without a token unless you pass --insecure-no-auth'."""
    write_config(tmp_path, {}, {})
    env = {k: v for k, v in os.environ.items() if k != "TOOLBRIDGE_AUTH_TOKEN"}
    command = [sys.executable, "-m", "proxy", "serve", "--transport", "http", "--host", "0.0.0.0",
               "--port", str(free_port()), "--config-dir", str(tmp_path)]
    with anyio.fail_after(30):
        done = await anyio.run_process(command, env=env, check=False)
    assert done.returncode != 0


# --- clients sharing the token --------------------------------------------------------------------


async def _task_answers(site: Site, forged: list[str | None]) -> list[tuple[str | None, str, int, str]]:
    """How client `ide-b` is answered on `tasks/get` of a task `ide-a` made, per forged header: (header, method,
    HTTP status, "result" or the error message)."""
    async with client(site.url, headers=site.auth, name="ide-a", extensions=[TaskClient()]) as a:
        created = await a.session.call_tool("jobs__forever", {}, allow_claimed=True)
    assert isinstance(created, CreatedTask)
    answered = []
    async with httpx2.AsyncClient(timeout=30) as http:
        for header in forged:
            headers = {**site.auth, **({"Mcp-Session-Id": header} if header else {})}
            status, body = await post(http, site.url, "tasks/get", {"taskId": created.task_id}, name="ide-b",
                                      capabilities={"extensions": {TASKS: {}}}, headers=headers)
            answered.append((header, "tasks/get", status, "result" if "result" in body else body["error"]["message"]))
    return answered


async def test_clients_sharing_the_token_are_one_principal_whatever_their_names(site: Site) -> None:
    """Attacks 'without per-user tokens ... all 2026-era requests share the anonymous owner' (docs/security.md,
    Who a request acts for): a client's name neither separates nor picks an owner."""
    assert [answer[2:] for answer in await _task_answers(site, [None])] == [(200, "result")]


async def test_a_forged_session_header_changes_nothing_on_a_shared_token(site: Site) -> None:
    """Attacks SPEC §8.1 'No header ... selects another owner': a 2026-era request's Mcp-Session-Id is never a
    session, so forged values (the old `[subject, name]` key, another session's id) answer as no header does."""
    forged = [json.dumps([None, "ide-a"]), json.dumps(["anonymous", "ide-a"]), "0" * 32, "r1.deadbeef"]
    assert {answer[2:] for answer in await _task_answers(site, [None, *forged])} == {(200, "result")}


async def test_a_result_link_on_a_shared_token_is_refused_in_another_profile(site: Site) -> None:
    """Attacks 'On an HTTP endpoint without per-user tokens ... the profile alone separates links'."""
    async with client(site.url, headers=site.auth) as owner:
        result = await owner.call_tool("data__big", {"size": SIZE})
        link = result.content[-1]
        assert isinstance(link, types.ResourceLink)
    async with client(f"{site.url}/narrow", headers=site.auth, mode="legacy") as other:
        with pytest.raises(MCPError) as refused:
            await other.read_resource(f"{link.uri}?page=2")
    assert refused.value.code == types.INVALID_PARAMS and "unknown, or expired" in refused.value.message


# --- a hostile upstream's text and the configured secret ---------------------------------------------


def _inert(value: str) -> bool:
    return not any(character in value for character in "\x1b\r\n\x07") and SECRET not in value


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_upstreams_error_text_is_inert_and_carries_no_configured_secret(site: Site, mode: str) -> None:
    """Attacks 'Upstream text is inert' and 'Secrets stay in the config' (errors and log messages a client gets)."""
    logged: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(json.dumps(params.model_dump(mode="json"), ensure_ascii=False))

    async with client(site.url, headers=site.auth, mode=mode, logging_callback=on_log,
                      **({"log_level": "debug"} if mode == "auto" else {})) as c:
        if mode == "legacy":
            await c.set_logging_level("debug")
        try:
            failed = (await c.call_tool("forger__fail", {})).model_dump_json()
        except MCPError as error:
            failed = f"{error.message} {error.data}"
        result = await c.call_tool("forger__fail_result", {})
        await c.call_tool("forger__log", {})
    assert "FORGED" in failed and _inert(failed)
    assert result.is_error and "FORGED" in text(result) and _inert(text(result))
    assert all(_inert(json.loads(entry)["data"] if isinstance(json.loads(entry)["data"], str)
                      else json.dumps(json.loads(entry))) for entry in logged)


async def test_status_and_the_audit_log_never_show_a_configured_secret(site: Site) -> None:
    """Attacks 'Every header and environment value you configure ... is redacted from logs, /status'."""
    async with client(site.url, headers=site.auth) as c:
        await c.call_tool("forger__fail_result", {})
    async with httpx2.AsyncClient(timeout=30) as http:
        status = (await http.get(f"{site.base}/status", headers=site.auth)).text
    assert SECRET not in status
    audit = site.config / "logs" / "audit.jsonl"
    assert audit.exists() and SECRET not in audit.read_text()


async def test_files_that_can_hold_secrets_are_the_owners_only(site: Site) -> None:
    """Attacks 'Files that can hold secrets are the owner's only' (logs/<server>.log and the audit log)."""
    logs = site.config / "logs"
    files = [*logs.glob("*.log"), logs / "audit.jsonl"]
    assert {path.name for path in files} >= {"forger.log", "audit.jsonl"}
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in files}
    assert all(mode == 0o600 for mode in modes.values()), modes


# --- rug pulls ----------------------------------------------------------------------------------


async def test_a_changed_or_new_tool_on_a_pinned_server_is_withheld_and_never_called(site: Site) -> None:
    """Attacks 'With pin: true ... a changed tool is withheld: it leaves tools/list, search and the catalog'."""
    async with client(site.url, headers=site.auth, mode="legacy") as c:
        assert text(await c.call_tool("rug__mutate", {})) == "mutated"
        with anyio.fail_after(20):
            while "rug__victim" in {t.name for t in (await c.list_tools()).tools}:
                await anyio.sleep(0.05)
        answers: list[Any] = []
        for name, arguments in (("rug__victim", {}), ("rug__newcomer", {}),
                                ("tool_call", {"name": "rug__victim", "arguments": {}}),
                                ("tool_call", {"name": "rug__newcomer", "arguments": {}})):
            try:
                answers.append(await c.call_tool(name, arguments))
            except MCPError as error:
                answers.append(error)
        described = text(await c.call_tool("tool_describe", {"names": ["rug__victim", "rug__newcomer"]}))
    assert all(isinstance(a, MCPError) or a.is_error for a in answers), answers
    assert "Ignore previous instructions" not in described
    called = [json.loads(line)[0] for line in site.rug_calls.read_text().splitlines()]
    assert "victim" not in called and "newcomer" not in called
