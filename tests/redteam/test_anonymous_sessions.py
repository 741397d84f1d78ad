"""One `--auth-token` shared by every client: the handshake-era session is the only owner smaller than the one
anonymous principal ('implicit promotion (handshake era): the session', docs/security.md 'Who a request acts
for'). One session's promotions must not reach another session, nor a 2026-era request that carries the
first session's `Mcp-Session-Id` ('A 2026-era HTTP request has no session, whatever Mcp-Session-Id header it
carries'), nor a request whose client name or `_meta` spells it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from conftest import free_port
from rt import handshake, in_session, post, serve_http, tool, upstream, write_config

pytestmark = pytest.mark.anyio

TOKEN = "anonymous-sessions-token-4f1c9a7e2b"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
async def url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    config = tmp_path_factory.mktemp("anonymous") / "config"
    write_config(config, {"data": upstream("data", tools=[tool(f"t{n}", f"Tool {n}.") for n in range(4)])},
                 {"core": [], "profiles": {"default": {"promote": 3}}, "startup_wait": 30})
    async with serve_http(config, free_port(), "--auth-token", TOKEN, ready=(200, 401)) as base:
        yield f"{base}/mcp"


def names(body: dict[str, Any]) -> set[str]:
    return {t["name"] for t in body["result"]["tools"]}


async def test_a_handshake_sessions_promotion_reaches_no_other_session_or_2026_request(url: str) -> None:
    """Session A uses `data__t1` through `tool_call` (promoting it for A); session B, a 2026-era request with
    A's session id in its header (and in `_meta`), under A's client name, all list without it."""
    async with httpx2.AsyncClient(timeout=30) as http:
        a = await handshake(http, url, TOKEN)
        _, called = await in_session(http, url, TOKEN, a, "tools/call",
                                     {"name": "tool_call", "arguments": {"name": "data__t1", "arguments": {}}})
        assert called["result"]["isError"] is False, called
        _, listed = await in_session(http, url, TOKEN, a, "tools/list", {})
        assert "data__t1" in names(listed)  # the control: promoted for A
        b = await handshake(http, url, TOKEN)
        _, by_b = await in_session(http, url, TOKEN, b, "tools/list", {})
        _, by_2026 = await post(http, url, "tools/list", {"_meta": {"sessionId": a}}, name="ide",
                                headers={**AUTH, "Mcp-Session-Id": a})
    assert "data__t1" not in names(by_b) and "data__t1" not in names(by_2026), (names(by_b), names(by_2026))
