"""OAuth through `toolbridge` processes: `login` then `serve` against an upstream that requires it,
and `serve --transport http` as a protected resource."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port, serve_app
from fleetdir import REPO, serve_http, write_fleet
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from servers.controllable import State
from servers.jwt_issuer import Issuer, issuer_app
from servers.oauth_upstream import AuthServer, consent, oauth_app

pytestmark = pytest.mark.anyio


async def run_login(config_dir: Path) -> tuple[int, str, str]:
    """`toolbridge login web`, with this test as the user who opens the printed URL and clicks Allow."""
    command = [sys.executable, "-m", "proxy", "login", "web", "--config-dir", str(config_dir)]
    process = await anyio.open_process(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    async with process:
        assert process.stdout is not None and process.stderr is not None
        printed = ""
        with anyio.fail_after(30):
            async for chunk in process.stdout:
                printed += chunk.decode()
                urls = [w for w in printed.split() if w.startswith("http") and "/authorize?" in w]
                if urls and "Waiting" in printed:
                    await consent(urls[0])
                    break
            async for chunk in process.stdout:
                printed += chunk.decode()
            errors = (await process.stderr.receive(65536)).decode() if await process.wait() else ""
    return process.returncode or 0, printed, errors


async def test_login_then_serve_reaches_the_oauth_upstream_and_logs_no_token(tmp_path: Path) -> None:
    port = free_port()
    auth = AuthServer(f"http://127.0.0.1:{port}")
    (tmp_path / "upstreams").mkdir()
    spec = {"url": f"{auth.base}/mcp", "auth": {"type": "oauth", "redirect_port": free_port()}}
    (tmp_path / "upstreams" / "web.yaml").write_text(yaml.safe_dump(spec))
    async with serve_app(oauth_app(auth), port):
        code, printed, errors = await run_login(tmp_path)
        assert code == 0, errors
        assert f"web: authorized, {len(State().tools)} tools" in printed and auth.consents == 1

        params = StdioServerParameters(command=sys.executable, cwd=str(REPO),
                                       args=["-m", "proxy", "serve", "--config-dir", str(tmp_path)],
                                       env={"TOOLBRIDGE_LOG_LEVEL": "debug"})
        with open(tmp_path / "serve.log", "w+", encoding="utf-8") as log:
            async with Client(stdio_client(params, errlog=log)) as client:
                with anyio.fail_after(30):
                    result = await client.call_tool("tool_call", {"name": "web__echo", "arguments": {"text": "hi"}})
            assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "hi", result
        logged = (tmp_path / "serve.log").read_text()
        assert "server web: ready" in logged
    secrets = [*auth.issued, *(c.client_secret for c in auth.clients.values() if c.client_secret)]
    assert [s for s in secrets if s in logged + printed + errors] == []
    assert json.loads((tmp_path / ".secrets" / "web.json").read_text())["tokens"]["access_token"] in auth.issued


async def test_serve_http_with_an_auth_block_is_a_protected_resource(tmp_path: Path) -> None:
    issuer_port, port = free_port(), free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}", audience=f"http://127.0.0.1:{port}/mcp")
    auth = {"issuer": issuer.base, "audience": issuer.audience, "jwks_url": f"{issuer.base}/jwks.json",
            "profile_claim": "groups", "profiles": {"ops": "narrow"}}
    write_fleet(tmp_path, {"mail": ["--tools", "3", "--prefix", "mail"], "disk": ["--tools", "2", "--prefix", "disk"]},
                {"toolsets": {"mail": {"tools": ["mail__*"]}}, "profiles": {"narrow": {"toolsets": ["mail"]}},
                 "auth": auth})
    async with serve_app(issuer_app(issuer), issuer_port), serve_http(tmp_path, port) as base:
        async with httpx2.AsyncClient() as http:
            refused = await http.post(f"{base}/mcp", json={})
            assert refused.status_code == 401
            assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in refused.headers[
                "www-authenticate"]
            metadata = (await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")).json()
            assert metadata["authorization_servers"] == [issuer.base]
        token = issuer.token(groups=["ops"])
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            with anyio.fail_after(30):
                names = {tool.name for tool in (await client.list_tools()).tools}
        assert names and all(not name.startswith("disk__") for name in names)
