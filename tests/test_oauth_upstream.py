"""OAuth 2.1 to an upstream, against a real SDK server that requires it (DCR + PKCE), on 127.0.0.1.

The user's consent is automated over HTTP (`consent`: open the URL, click Allow, follow the
redirect to toolbridge's loopback listener). Every test ends by checking that no token, code or
client secret the authorization server handed out shows up in any log line or status.
"""

from __future__ import annotations

import json
import logging
import stat
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import keyring
import pytest
from conftest import free_port, serve_app
from keyring.backend import KeyringBackend
from mcp import Client, types
from mcp.shared.auth import OAuthClientInformationFull
from servers.controllable import State
from servers.harness import running_fleet, wait_for
from servers.oauth_upstream import SCOPE, AuthServer, consent, oauth_app

from proxy.config import OAuthSettings, ToolsetsConfig, UpstreamConfig
from proxy.downstream import ChangeNotifier, Handlers, build_server
from proxy.errors import UpstreamNeedsAuth, UpstreamRefused
from proxy.upstream import Fleet, UpstreamState, login
from proxy.views import Views

pytestmark = pytest.mark.anyio


class MemoryKeyring(KeyringBackend):
    """An OS keyring stand-in that counts reads (to see a waiting server poll it)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], str] = {}
        self.reads = 0

    def get_password(self, service: str, username: str) -> str | None:
        self.reads += 1
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.secrets.pop((service, username), None)


KeyringBackend._classes.discard(MemoryKeyring)  # only where a test installs it, never by discovery


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


@asynccontextmanager
async def oauth_upstream(**options: Any) -> AsyncIterator[tuple[AuthServer, UpstreamConfig]]:
    port = free_port()
    auth = AuthServer(f"http://127.0.0.1:{port}", **options)
    async with serve_app(oauth_app(auth), port):
        yield auth, UpstreamConfig(name="web", url=f"{auth.base}/mcp", auth=OAuthSettings(redirect_port=free_port()))


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def assert_nothing_leaked(auth: AuthServer, logs: pytest.LogCaptureFixture, fleet: Fleet | None = None) -> None:
    shown = logs.text + " ".join(f"{s.reason} {s.last_error}" for s in fleet.status()) if fleet else logs.text
    secrets = [*auth.issued, *(c.client_secret for c in auth.clients.values() if c.client_secret)]
    assert secrets and logs.records
    assert [s for s in secrets if s in shown] == []


async def test_login_registers_gets_consent_and_stores_tokens_privately(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    async with oauth_upstream() as (auth, config):
        with anyio.fail_after(20):
            tools = await login(config, tmp_path, show_url=consent)
        assert tools == len(State().tools) and auth.consents == 1 and len(auth.clients) == 1  # registered dynamically
        secrets_dir = tmp_path / ".secrets"
        record = secrets_dir / "web.json"
        assert stat.S_IMODE(secrets_dir.stat().st_mode) == 0o700 and stat.S_IMODE(record.stat().st_mode) == 0o600
        assert json.loads(record.read_text())["tokens"]["access_token"] in auth.access

        async with running_fleet([config], tmp_path) as (fleet, _registry):
            with anyio.fail_after(20):
                await fleet.wait_state("web", UpstreamState.READY)
            assert text(await fleet.call_tool("web", "echo", {"text": "hi"})) == "hi"
            assert auth.consents == 1 and len(auth.clients) == 1
            assert_nothing_leaked(auth, logs, fleet)


async def test_a_configured_client_id_is_used_instead_of_registering(tmp_path: Path) -> None:
    async with oauth_upstream() as (auth, config):
        first = config.model_copy(update={"name": "first"})
        with anyio.fail_after(20):
            await login(first, tmp_path, show_url=consent)
        (client,) = auth.clients.values()
        settings = OAuthSettings(client_id=client.client_id, client_secret=client.client_secret,
                                 redirect_port=first.auth.redirect_port if first.auth else 0)
        with anyio.fail_after(20):
            await login(config.model_copy(update={"auth": settings}), tmp_path, show_url=consent)
        assert len(auth.clients) == 1 and auth.consents == 2
        assert "client" not in json.loads((tmp_path / ".secrets" / "web.json").read_text())


@pytest.mark.parametrize("listed", [["client_secret_basic"], []])
async def test_a_configured_secret_authenticates_as_the_authorization_server_lists(
    tmp_path: Path, listed: list[str]
) -> None:
    """A client registered beforehand for `client_secret_basic` (where nothing is listed, RFC 8414's default);
    the SDK's server, listing post first, takes the secret in the body (the test above)."""
    async with oauth_upstream(token_auth_methods=listed) as (auth, config):
        assert config.auth is not None
        auth.clients["pre"] = OAuthClientInformationFull(
            client_id="pre", client_secret="pre-secret", token_endpoint_auth_method="client_secret_basic",
            scope=SCOPE, redirect_uris=[f"http://127.0.0.1:{config.auth.redirect_port}/callback"],  # type: ignore[list-item]
        )
        settings = OAuthSettings(client_id="pre", client_secret="pre-secret", redirect_port=config.auth.redirect_port)
        with anyio.fail_after(20):
            assert await login(config.model_copy(update={"auth": settings}), tmp_path, show_url=consent) > 0
        assert auth.consents == 1 and list(auth.clients) == ["pre"]


async def test_without_consent_the_server_waits_in_needs_auth_until_a_login(
    tmp_path: Path, memory_keyring: MemoryKeyring, logs: pytest.LogCaptureFixture
) -> None:
    async with oauth_upstream() as (auth, config), running_fleet([config], tmp_path, login_poll=0.02) as (fleet, _):
        with anyio.fail_after(20):
            await fleet.ready.wait()  # needing consent settles a server: startup never waits for a person
        (status,) = fleet.status()
        assert status.state is UpstreamState.NEEDS_AUTH and "toolbridge login web" in status.reason
        with pytest.raises(UpstreamNeedsAuth, match="toolbridge login web"):
            await fleet.call_tool("web", "echo", {"text": "hi"})
        polls = memory_keyring.reads
        with anyio.fail_after(20):
            await wait_for(lambda: memory_keyring.reads >= polls + 5)
        assert auth.discoveries == 1  # waiting is polling the token store, not the server

        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
            await fleet.wait_state("web", UpstreamState.READY)
        assert text(await fleet.call_tool("web", "echo", {"text": "back"})) == "back"
        assert not (tmp_path / ".secrets").exists()  # the keyring holds them
        assert list(memory_keyring.secrets) == [("toolbridge", f"web {config.url}")]
        assert_nothing_leaked(auth, logs, fleet)


async def test_tokens_refresh_before_they_expire_without_the_user(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    async with oauth_upstream(access_ttl=4) as (auth, config):
        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
        async with running_fleet([config], tmp_path, keepalive=0.05) as (fleet, _registry):
            with anyio.fail_after(20):
                await fleet.wait_state("web", UpstreamState.READY)
                await wait_for(lambda: auth.refreshes >= 2)
            assert text(await fleet.call_tool("web", "echo", {"text": "still"})) == "still"
            assert fleet.status()[0].state is UpstreamState.READY and auth.consents == 1
            assert min(auth.time_left_at_refresh) > 0  # refreshed while the old token still worked
            assert_nothing_leaked(auth, logs, fleet)


async def test_a_stored_token_past_its_expiry_is_refreshed_after_a_restart(tmp_path: Path) -> None:
    async with oauth_upstream() as (auth, config):
        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
        record_path = tmp_path / ".secrets" / "web.json"
        record = json.loads(record_path.read_text())
        stale = record["tokens"]["access_token"]
        record_path.write_text(json.dumps({**record, "expires_at": time.time() - 10}))
        async with running_fleet([config], tmp_path) as (fleet, _registry):
            with anyio.fail_after(20):
                await fleet.wait_state("web", UpstreamState.READY)
            assert auth.refreshes == 1 and auth.consents == 1
            assert json.loads(record_path.read_text())["tokens"]["access_token"] != stale


async def test_revoked_tokens_need_a_new_consent_and_calls_name_the_login(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    async with oauth_upstream() as (auth, config):
        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
        async with running_fleet([config], tmp_path, keepalive=0.05, login_poll=0.02) as (fleet, registry):
            with anyio.fail_after(20):
                await fleet.wait_state("web", UpstreamState.READY)
            auth.revoke_everything()
            with anyio.fail_after(20):
                await fleet.wait_state("web", UpstreamState.NEEDS_AUTH)
            assert "web__echo" in registry.tools and fleet.availability("web")  # still offered: a call explains
            with pytest.raises(UpstreamNeedsAuth, match="toolbridge login web"):
                await fleet.call_tool("web", "echo", {"text": "hi"})

            with anyio.fail_after(20):
                await login(config, tmp_path, show_url=consent)
                await fleet.wait_state("web", UpstreamState.READY)
            assert auth.consents == 2
            assert text(await fleet.call_tool("web", "echo", {"text": "again"})) == "again"
            assert_nothing_leaked(auth, logs, fleet)


async def test_a_refused_consent_is_a_clear_error(tmp_path: Path) -> None:
    async def deny(url: str) -> None:
        await consent(url, decision="deny")

    async with oauth_upstream() as (_auth, config):
        with anyio.fail_after(20), pytest.raises(UpstreamRefused, match="refused"):
            await login(config, tmp_path, show_url=deny)


@asynccontextmanager
async def downstream(fleet: Fleet, registry: Any) -> AsyncIterator[Any]:
    """The downstream SDK server in front of `fleet`, every tool listed as it is (pass-through)."""
    views = Views(registry, ToolsetsConfig.model_validate({"tool_search": {"enabled": "off"}}), fleet.availability)
    notifier = ChangeNotifier(views)
    handlers = Handlers(views, fleet, notifier, fleet_ready=fleet.ready, startup_wait=5)
    async with anyio.create_task_group() as tg:
        await tg.start(notifier.run)
        await tg.start(handlers.run)
        yield build_server(handlers)
        tg.cancel_scope.cancel()


@asynccontextmanager
async def needing_consent(tmp_path: Path, auth: AuthServer, config: UpstreamConfig) -> AsyncIterator[Any]:
    """A fleet whose OAuth upstream was connected (its tools known) and then had its tokens revoked."""
    with anyio.fail_after(20):
        await login(config, tmp_path, show_url=consent)
    async with running_fleet([config], tmp_path, keepalive=0.05, login_poll=0.02) as (fleet, registry):
        with anyio.fail_after(20):
            await fleet.wait_state("web", UpstreamState.READY)
            auth.revoke_everything()
            await fleet.wait_state("web", UpstreamState.NEEDS_AUTH)
        async with downstream(fleet, registry) as server:
            yield fleet, server


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_asks_its_client_to_open_the_authorization_url_then_completes(
    tmp_path: Path, mode: str, logs: pytest.LogCaptureFixture
) -> None:
    asked: list[types.ElicitRequestParams] = []
    async with oauth_upstream() as (auth, config), needing_consent(tmp_path, auth, config) as (fleet, server), \
            anyio.create_task_group() as browser:

        async def open_in_browser(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params)
            assert isinstance(params, types.ElicitRequestURLParams)
            browser.start_soon(consent, params.url)  # the user signs in after the client said "opening"
            return types.ElicitResult(action="accept")

        async with Client(server, mode=mode, elicitation_callback=open_in_browser) as client:
            with anyio.fail_after(30):
                result = await client.call_tool("web__echo", {"text": "after consent"})
        assert not result.is_error and text(result) == "after consent", result
        assert len(asked) == 1 and "web" in asked[0].message and auth.consents == 2
        assert fleet.status()[0].state is UpstreamState.READY
        assert_nothing_leaked(auth, logs, fleet)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_that_cannot_open_urls_is_told_to_run_login(tmp_path: Path, mode: str) -> None:
    async with oauth_upstream() as (auth, config), needing_consent(tmp_path, auth, config) as (fleet, server), \
            Client(server, mode=mode) as client:
        result = await client.call_tool("web__echo", {"text": "hi"})
        assert result.is_error and "toolbridge login web" in text(result)
        assert fleet.status()[0].state is UpstreamState.NEEDS_AUTH and auth.consents == 1


async def test_a_call_that_meets_a_revoked_token_gets_consent_and_runs_once(tmp_path: Path) -> None:
    async with oauth_upstream() as (auth, config):
        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
        async with running_fleet([config], tmp_path, keepalive=600, login_poll=0.02) as (fleet, registry), \
                downstream(fleet, registry) as server, anyio.create_task_group() as browser:

            async def open_in_browser(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
                assert isinstance(params, types.ElicitRequestURLParams)
                browser.start_soon(consent, params.url)
                return types.ElicitResult(action="accept")

            with anyio.fail_after(20):
                await fleet.wait_state("web", UpstreamState.READY)
            auth.revoke_everything()  # nothing has noticed yet: the call is the first to meet the 401
            async with Client(server, mode="legacy", elicitation_callback=open_in_browser) as client:
                with anyio.fail_after(30):
                    result = await client.call_tool("web__echo", {"text": "once"})
            assert text(result) == "once" and auth.consents == 2


async def test_without_a_channel_a_revoked_token_mid_call_names_the_login(tmp_path: Path) -> None:
    async with oauth_upstream() as (auth, config):
        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
        async with running_fleet([config], tmp_path, keepalive=600) as (fleet, _registry):
            with anyio.fail_after(20):
                await fleet.wait_state("web", UpstreamState.READY)
            auth.revoke_everything()
            with pytest.raises(UpstreamNeedsAuth, match="toolbridge login web"):  # not "outcome uncertain"
                await fleet.call_tool("web", "echo", {"text": "hi"})


async def test_a_call_refused_for_a_narrow_scope_gets_consent_for_the_wider_one_and_runs_once(tmp_path: Path) -> None:
    """A 403 `insufficient_scope` (a step-up): the stored token is still valid for the rest, so the consent
    must ask for the union of the scopes anyway, and the call runs with the new token."""
    async with oauth_upstream(step_up="write") as (auth, config):
        with anyio.fail_after(20):
            await login(config, tmp_path, show_url=consent)
        assert [token.scopes for token in auth.access.values()] == [["tools"]]
        async with running_fleet([config], tmp_path, keepalive=600, login_poll=0.02) as (fleet, registry), \
                downstream(fleet, registry) as server, anyio.create_task_group() as browser:
            asked: list[str] = []

            async def open_in_browser(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
                assert isinstance(params, types.ElicitRequestURLParams)
                asked.append(params.url)
                browser.start_soon(consent, params.url)
                return types.ElicitResult(action="accept")

            with anyio.fail_after(20):
                await fleet.wait_state("web", UpstreamState.READY)
            async with Client(server, mode="legacy", elicitation_callback=open_in_browser) as client:
                with anyio.fail_after(30):
                    result = await client.call_tool("web__echo", {"text": "wider"})
            assert not result.is_error and text(result) == "wider", result
            assert len(asked) == 1 and "scope=tools+write" in asked[0] and auth.consents == 2
            assert sorted(map(sorted, (token.scopes for token in auth.access.values()))) == [
                ["tools"], ["tools", "write"]]
