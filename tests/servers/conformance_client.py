"""toolbridge as the client under test of the conformance suite's client scenarios.

    MCP_CONFORMANCE_SCENARIO=<scenario> python tests/servers/conformance_client.py <revision> <server-url>

The suite's server is toolbridge's only upstream (`url:`, raw names, every tool core); a downstream SDK
client then does over stdio what the reference client does in the scenario, so every request the suite sees
is one toolbridge made as the client of an upstream. This file plays only the people around toolbridge: the
operator who writes its config (an `auth/*` scenario's server wants OAuth; `auth/pre-registration` hands out
a client id and secret in `MCP_CONFORMANCE_CONTEXT`), the user who approves consent (the suite's authorization
server approves without asking, so opening the authorization URL is one GET whose redirects end at
toolbridge's loopback callback), and the downstream client that makes the scenario's calls and answers the
elicitations toolbridge relays, in the era of the scenario's revision (a 2025-11-25 client for that set's
scenarios, a 2026-07-28 one for the other's), so toolbridge meets the suite in the era the scenario judges.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import yaml
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.client.context import ClientRequestContext

from proxy.config import load_upstream
from proxy.errors import UpstreamError
from proxy.upstream.oauth import login

REPO = Path(__file__).resolve().parents[2]
META_TOOLS = ("tool_search", "tool_describe", "tool_call")
# A Client ID Metadata Document URL, as the reference client gives: the suite's servers that support CIMD
# expect it as the client id, the others have toolbridge register itself.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"  # tokens in the temporary config dir
ENV = {"TOOLBRIDGE_LOG_LEVEL": "warning", **os.environ}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _upstream(url: str, scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    upstream: dict[str, Any] = {"url": url, "prefix": False}
    if scenario.startswith("auth/"):
        auth: dict[str, Any] = {"type": "oauth", "redirect_port": _free_port()}
        if "client_id" in context:
            auth.update(client_id=context["client_id"], client_secret=context.get("client_secret"))
        else:
            auth["client_metadata_url"] = CLIENT_METADATA_URL
        upstream["auth"] = auth
    return upstream


async def _approve(url: str) -> None:
    """The user's consent: the suite's authorization server redirects at once, to toolbridge's callback."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=20) as http:
        await http.get(url)


async def _login(config: Path) -> None:
    """What `toolbridge login suite` does, the user approving the URL it shows. A refused login (the point of
    some scenarios) leaves the served upstream without tokens."""
    upstream = load_upstream(config / "upstreams" / "suite.yaml", os.environ)
    with contextlib.suppress(UpstreamError):
        await login(upstream, config, show_url=_approve, timeout=30)


async def _elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    if isinstance(params, types.ElicitRequestURLParams):  # toolbridge asking for consent (a scope step-up)
        await _approve(params.url)
        return types.ElicitResult(action="accept")
    return types.ElicitResult(action="accept", content=_filled(params.requested_schema))


def _filled(schema: dict[str, Any]) -> dict[str, Any]:
    """The form as a user accepts it: each field's default as shown, a yes or a word where it has none."""
    plain = {"boolean": True, "integer": 1, "number": 1, "string": "yes"}
    return {name: field.get("default", field.get("enum", [plain.get(field.get("type"), "yes")])[0])
            for name, field in schema.get("properties", {}).items()}


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> None:
    result = await client.call_tool(name, arguments)
    if result.is_error:  # the suite judges what reached it; this says why a call stopped short
        print(f"{name}: {result.content}", file=sys.stderr)


Play = Callable[[Client, dict[str, Any]], Awaitable[None]]


async def _call_first(client: Client, context: dict[str, Any]) -> None:
    tools = [tool for tool in (await client.list_tools()).tools if tool.name not in META_TOOLS]
    if tools:
        await _call(client, tools[0].name, {"a": 2, "b": 3})


async def _list_only(client: Client, context: dict[str, Any]) -> None:
    await client.list_tools()


def _in_turn(*calls: tuple[str, dict[str, Any]]) -> Play:
    async def play(client: Client, context: dict[str, Any]) -> None:
        await client.list_tools()
        for name, arguments in calls:
            await _call(client, name, arguments)

    return play


async def _context_calls(client: Client, context: dict[str, Any]) -> None:
    await client.list_tools()
    for call in context.get("toolCalls", []):
        await _call(client, call["name"], call.get("arguments") or {})


async def _echo_schema(client: Client, context: dict[str, Any]) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    await _call(client, "json_schema_echo", {"schema": tools["json_schema_2020_12_tool"].input_schema})


PLAYS: dict[str, Play] = {
    "json-schema-ref-no-deref": _list_only,
    "json-schema-2020-12-preservation": _echo_schema,
    "http-custom-headers": _context_calls,
    "http-invalid-tool-headers": _in_turn(("valid_tool", {"region": "us-west1"})),
    "sep-2322-client-request-state": _in_turn(
        ("test_mrtr_echo_state", {}), ("test_mrtr_unrelated", {}), ("test_mrtr_no_state", {}),
        ("test_mrtr_no_result_type", {})),
    "elicitation-sep1034-client-defaults": _in_turn(("test_client_elicitation_defaults", {})),
}
AUTH_PLAY = _in_turn(("test-tool", {}))


async def main(revision: str, url: str, scenario: str, context: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory)
        (config / "upstreams").mkdir()
        (config / "upstreams" / "suite.yaml").write_text(yaml.safe_dump(_upstream(url, scenario, context)))
        (config / "toolsets.yaml").write_text(
            yaml.safe_dump({"core": ["*"], "startup_wait": 20, "tool_search": {"semantic": "off"}}))
        if scenario.startswith("auth/"):
            await _login(config)
        serve = ["-m", "proxy", "serve", "--config-dir", str(config)]
        server = StdioServerParameters(command=sys.executable, args=serve, cwd=str(REPO), env=ENV)
        play = PLAYS.get(scenario, AUTH_PLAY if scenario.startswith("auth/") else _call_first)
        mode = "legacy" if revision == "2025-11-25" else revision
        async with Client(stdio_client(server), mode=mode, elicitation_callback=_elicit) as client:
            await play(client, context)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""),
              json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}"))
