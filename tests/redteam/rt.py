"""Shared parts of the red-team suite: config dirs, `toolbridge serve` as a subprocess, OAuth tokens
from a local key (published as a JWKS file), SDK clients of both eras, and raw JSON-RPC POSTs whose
headers a test forges."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import yaml
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleetdir import serve_http
from servers.jwt_issuer import Issuer
from servers.tasks_server import TASKS

__all__ = ["serve_http"]

UPSTREAM = str(Path(__file__).with_name("upstream.py"))
SERVERS = Path(__file__).resolve().parent.parent / "servers"
REPO = Path(__file__).resolve().parent.parent.parent
ISSUER = "https://id.redteam.test"
MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
TASK_CAPS = {"extensions": {TASKS: {}}}  # a client's capabilities that accept tasks


def upstream(name: str, **spec: Any) -> dict[str, Any]:
    """An upstream file for `upstream.py` with this spec."""
    return {"command": sys.executable, "args": [UPSTREAM, json.dumps({"name": name, **spec})],
            "connect_timeout": 30}


def tool(name: str, description: str = "", **properties: Any) -> dict[str, Any]:
    return {"name": name, "description": description or f"The {name} tool.",
            "inputSchema": {"type": "object", "properties": properties}}


def write_config(directory: Path, upstreams: dict[str, dict[str, Any]], toolsets: dict[str, Any]) -> Path:
    (directory / "upstreams").mkdir(parents=True, exist_ok=True)
    for name, spec in upstreams.items():
        (directory / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump(toolsets))
    return directory


def oauth_issuer(directory: Path, audience: str) -> tuple[Issuer, dict[str, Any]]:
    """An issuer whose JWKS is a file in `directory`, and the `auth:` block naming it."""
    issuer = Issuer(ISSUER, audience=audience)
    (directory / "jwks.json").write_text(json.dumps({"keys": [key.jwk() for key in issuer.keys]}))
    return issuer, {"issuer": ISSUER, "audience": audience, "jwks_file": str(directory / "jwks.json"),
                    "scopes_required": ["mcp"]}


@asynccontextmanager
async def client(url: str, *, token: str | None = None, mode: str = "auto", name: str = "ide",
                 headers: dict[str, str] | None = None, **options: Any) -> AsyncIterator[Client]:
    """A real SDK client over Streamable HTTP; `headers` are sent on every request (forged ones too)."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(headers=sent, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode,
                   client_info=types.Implementation(name=name, version="1"), **options) as connected:
        yield connected


def text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def meta(name: str = "ide", capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """The per-request `_meta` of a 2026-era request."""
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities or {}, **extra}


def modern_headers(method: str, params: dict[str, Any]) -> dict[str, str]:
    """The headers an honest 2026-era client sends with this request (SEP-2243)."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Mcp-Protocol-Version": MODERN, "Mcp-Method": method}
    named = params.get("name") or params.get("uri") or params.get("taskId")
    if named is not None:
        headers["Mcp-Name"] = str(named)
    return headers


async def post(http: httpx2.AsyncClient, url: str, method: str, params: dict[str, Any], *,
               name: str = "ide", capabilities: dict[str, Any] | None = None,
               headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """One raw 2026-era JSON-RPC POST; `headers` replace or add to the honest ones. Returns the HTTP
    status and the JSON-RPC message (the last `data:` of an event stream)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method,
            "params": {**params, "_meta": {**meta(name, capabilities), **params.get("_meta", {})}}}
    sent = {**modern_headers(method, params), **(headers or {})}
    response = await http.post(url, json=body, headers=sent)
    return response.status_code, parse(response)


def parse(response: httpx2.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        data = [line for line in data if line]
        return json.loads(data[-1]) if data else {}
    try:
        return response.json()
    except ValueError:
        return {"raw": response.text}


def scrub(value: Any, *names: str) -> str:
    """`value` as JSON with each of `names` replaced by one placeholder: what remains must not tell them apart."""
    dumped = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    for name in sorted(names, key=len, reverse=True):
        dumped = dumped.replace(name, "<NAME>")
    return dumped


async def listed(c: Client) -> set[str]:
    return {t.name for t in (await c.list_tools()).tools}


async def ignore_sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    """A sampling callback that declares the capability; the rounds a test drives by hand never reach it."""
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="?"), model="m")


async def handshake(http: httpx2.AsyncClient, url: str, token: str) -> str:
    """A raw handshake-era session of the token's user at `url`; returns its Mcp-Session-Id."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    response = await http.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "ide", "version": "1"}}})
    session = response.headers["mcp-session-id"]
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    headers={**headers, "Mcp-Session-Id": session, "Mcp-Protocol-Version": HANDSHAKE})
    return session


async def in_session(http: httpx2.AsyncClient, url: str, token: str, session: str, method: str,
                     params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """One raw request inside a handshake-era session: its HTTP status and JSON-RPC body."""
    response = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": method, "params": params},
                               headers={"Authorization": f"Bearer {token}", "Mcp-Session-Id": session,
                                        "Accept": "application/json, text/event-stream",
                                        "Mcp-Protocol-Version": HANDSHAKE})
    return response.status_code, parse(response)
