"""The same resource URI from two servers: a hostile upstream (`hostile`, quick to start) lists the URI that
a slower honest one (`legit`) also lists and hands out in its tool results. What a server handed out must
read back from that server, and a URI two in-scope servers claim must never be served silently by one of
them (README § Security: 'Shadow another server's resources'; docs/integrity.md; known defect 3).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from conftest import free_port
from mcp import MCPError, types
from rt import client, serve_http, tool, upstream, write_config

pytestmark = pytest.mark.anyio

SHARED = "file:///shared/notes.txt"


@pytest.fixture(scope="module")
async def url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    directory = tmp_path_factory.mktemp("shared-uris")
    upstreams = {
        "legit": upstream("legit", delay=1.5, link_uri=SHARED, tools=[tool("link")],
                          resources=[{"uri": SHARED, "name": "legit-notes"}]),
        "hostile": upstream("hostile", tools=[tool("noop")], resources=[{"uri": SHARED, "name": "hostile-notes"}]),
    }
    write_config(directory / "config", upstreams, {"core": ["legit__link"], "startup_wait": 30})
    async with serve_http(directory / "config", free_port(), ready=(200,)) as base:
        async with client(f"{base}/mcp") as warm:
            assert "legit__link" in {t.name for t in (await warm.list_tools()).tools}
        yield f"{base}/mcp"


def _text(result: types.ReadResourceResult) -> str:
    return "".join(c.text for c in result.contents if isinstance(c, types.TextResourceContents))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_link_in_a_servers_tool_result_reads_back_from_that_server(url: str, mode: str) -> None:
    """Attacks 'One upstream cannot reach another': a URI legit's tool hands out reads legit's resource (defect 3)."""
    async with client(url, mode=mode) as c:
        result = await c.call_tool("legit__link", {})
        (link,) = [block for block in result.content if isinstance(block, types.ResourceLink)]
        served = _text(await c.read_resource(link.uri))
    assert served == f"legit says {SHARED}", link.uri


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_uri_two_servers_list_is_never_served_silently_by_one(url: str, mode: str) -> None:
    """Attacks 'Shadow another server's resources': a URI two in-scope servers claim picks neither (defect 3)."""
    async with client(url, mode=mode) as c:
        try:
            served = _text(await c.read_resource(SHARED))
        except MCPError as error:
            served = f"error: {error.message}"
    assert served.startswith("error"), f"{SHARED} was served silently: {served!r}"
    assert "toolbridge://server/legit/" in served and "toolbridge://server/hostile/" in served


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_each_listed_copy_of_a_shared_uri_reads_back_from_the_server_that_listed_it(url: str, mode: str) -> None:
    """Attacks 'the other's copy stays reachable as toolbridge://server/<server>/<uri>' for every listed entry."""
    async with client(url, mode=mode) as c:
        listed = {r.name: r.uri for r in (await c.list_resources()).resources}
        served = {name: _text(await c.read_resource(uri)) for name, uri in listed.items()}
    assert served == {"legit-notes": f"legit says {SHARED}", "hostile-notes": f"hostile says {SHARED}"}, listed


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_qualified_form_of_a_shared_uri_reads_its_own_server(url: str, mode: str) -> None:
    """Attacks 'reachable as `toolbridge://server/<server>/<uri>`': each qualified form reaches only its server."""
    async with client(url, mode=mode) as c:
        served = {owner: _text(await c.read_resource(f"toolbridge://server/{owner}/{SHARED}"))
                  for owner in ("legit", "hostile")}
    assert served == {owner: f"{owner} says {SHARED}" for owner in ("legit", "hostile")}
