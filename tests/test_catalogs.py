"""URIs across servers: one that two servers in a session's scope claim belongs to neither, whatever the timing
or the names; every copy is reachable, and every link reads back from the server that handed it out."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import anyio
import pytest
from inprocess import gateway
from mcp import Client, MCPError, types
from servers.conformance_fixture import build_server

from proxy import cli
from proxy.app import run_gateway
from proxy.catalogs import AmbiguousUri, Catalogs, Shadowed
from proxy.config import Config, UpstreamConfig
from proxy.registry import Registry

URI = "file:///home/user/.ssh/config"
TEMPLATE = "file:///home/{user}/notes"
FIXTURE = Path(__file__).parent / "servers" / "conformance_fixture.py"


def resource(uri: str, name: str) -> types.Resource:
    return types.Resource(uri=uri, name=name)


def template(uri_template: str, name: str) -> types.ResourceTemplate:
    return types.ResourceTemplate(uri_template=uri_template, name=name)


def listing(catalogs: Catalogs, server: str, *uris: str, templates: tuple[str, ...] = ()) -> None:
    catalogs.set_server_catalog(server, [resource(u, f"{server} {u}") for u in uris],
                                [template(t, f"{server} {t}") for t in templates], [])


def test_a_uri_two_servers_list_is_neither_ones_whoever_listed_first(caplog: pytest.LogCaptureFixture) -> None:
    catalogs = Catalogs(Registry())
    listing(catalogs, "zzz", URI, templates=(TEMPLATE,))
    with caplog.at_level(logging.WARNING, logger="proxy.catalogs"):
        listing(catalogs, "aaa", URI, templates=(TEMPLATE,))
    view = catalogs.view(["aaa", "zzz"])
    with pytest.raises(AmbiguousUri) as refused:
        view.route_uri(URI)
    assert refused.value.alternatives == [f"toolbridge://server/aaa/{URI}", f"toolbridge://server/zzz/{URI}"]
    with pytest.raises(AmbiguousUri):
        view.route_uri("file:///home/bob/notes")
    assert view.route_uri(f"toolbridge://server/aaa/{URI}") == ("aaa", URI)
    assert view.route_uri(f"toolbridge://server/zzz/{URI}") == ("zzz", URI)
    assert [r.uri for r in view.resources] == [f"toolbridge://server/aaa/{URI}", f"toolbridge://server/zzz/{URI}"]
    assert [r.name for r in view.resources] == [f"aaa {URI}", f"zzz {URI}"]
    assert [t.uri_template for t in view.templates] == [f"toolbridge://server/aaa/{TEMPLATE}",
                                                        f"toolbridge://server/zzz/{TEMPLATE}"]
    assert catalogs.shadowed() == [Shadowed(URI, "resource", ("aaa", "zzz")),
                                   Shadowed(TEMPLATE, "template", ("aaa", "zzz"))]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"servers aaa, zzz all list the resource {URI!r}" in w for w in warnings)


@pytest.mark.parametrize("order", [("honest", "hostile"), ("hostile", "honest")], ids=["honest-first", "hostile-first"])
def test_a_faster_server_never_takes_a_uri_another_lists(order: tuple[str, str]) -> None:
    catalogs = Catalogs(Registry())
    for server in order:
        listing(catalogs, server, URI)
    view = catalogs.view(["honest", "hostile"])
    with pytest.raises(AmbiguousUri):
        view.route_uri(URI)
    assert view.address("honest", URI) == f"toolbridge://server/honest/{URI}"
    assert view.address("hostile", URI) == f"toolbridge://server/hostile/{URI}"


def test_an_exact_listing_comes_before_a_catch_all_template_and_two_matching_templates_are_ambiguous() -> None:
    catalogs = Catalogs(Registry())
    listing(catalogs, "notes", "file:///etc/hosts", templates=(TEMPLATE,))
    listing(catalogs, "catchall", templates=("file:///{+path}",))
    view = catalogs.view(["catchall", "notes"])
    assert view.route_uri("file:///etc/hosts") == ("notes", "file:///etc/hosts")
    assert view.route_uri("file:///etc/passwd") == ("catchall", "file:///etc/passwd")
    with pytest.raises(AmbiguousUri):
        view.route_uri("file:///home/bob/notes")


def test_a_claim_outlives_the_connection_and_a_relisting_without_the_uri_gives_it_up() -> None:
    catalogs = Catalogs(Registry())
    listing(catalogs, "zzz", URI)
    listing(catalogs, "aaa", URI)
    catalogs.remove_server("zzz")  # gone for now: its URI does not pass to aaa meanwhile
    view = catalogs.view(["aaa", "zzz"])
    with pytest.raises(AmbiguousUri):
        view.route_uri(URI)
    assert [r.uri for r in view.resources] == [f"toolbridge://server/aaa/{URI}"]
    assert catalogs.shadowed() == []  # of connected servers
    listing(catalogs, "zzz", "file:///other")  # back, without it: the claim goes
    assert catalogs.view(["aaa", "zzz"]).route_uri(URI) == ("aaa", URI)


def test_a_session_whose_scope_has_one_claimer_gets_the_plain_uri() -> None:
    catalogs = Catalogs(Registry())
    listing(catalogs, "zzz", URI)
    listing(catalogs, "aaa", URI)
    view = catalogs.view(["aaa"])
    assert view.route_uri(URI) == ("aaa", URI) and [r.uri for r in view.resources] == [URI]
    assert view.address("aaa", URI) == URI
    assert view.route_uri(f"toolbridge://server/zzz/{URI}") is None  # out of scope


def test_a_link_reads_back_from_the_server_that_handed_it_out() -> None:
    catalogs = Catalogs(Registry())
    listing(catalogs, "own", "file:///own", templates=("own://{id}",))
    listing(catalogs, "other", "file:///theirs")
    view = catalogs.view(["other", "own"])
    assert view.address("own", "file:///own") == "file:///own"
    assert view.address("own", "own://7") == "own://7"  # its own template routes it back
    assert view.address("own", "file:///theirs") == "toolbridge://server/own/file:///theirs"
    assert view.address("own", "https://example.com/a") == "toolbridge://server/own/https://example.com/a"
    assert view.address("own", "ui://own/app.html") == "ui://own/app.html"
    link = types.ResourceLink(type="resource_link", uri="file:///theirs", name="x")
    assert view.addressed("own", link).uri == "toolbridge://server/own/file:///theirs"


@pytest.mark.anyio
async def test_through_the_gateway_each_copy_is_qualified_and_every_handed_out_uri_reads_back() -> None:
    async with gateway([], servers={"zzz": build_server(), "aaa": build_server()}) as harness, \
            Client(harness.server, mode="legacy") as client:
        uris = [r.uri for r in (await client.list_resources()).resources]
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        with pytest.raises(MCPError) as refused:
            await client.read_resource("test://static-text")
        qualified = "toolbridge://server/aaa/test://static-text"
        read = await client.read_resource(qualified)
        prompt = await client.get_prompt("aaa__test_prompt_with_embedded_resource",
                                         {"resourceUri": "test://static-text"})
        result = await client.call_tool("tool_call", {"name": "aaa__test_embedded_resource", "arguments": {}})
    assert "test://static-text" not in uris
    assert qualified in uris and "toolbridge://server/zzz/test://static-text" in uris
    assert "toolbridge://server/aaa/test://template/{id}/data" in templates
    assert refused.value.code == types.INVALID_PARAMS and qualified in refused.value.message
    assert refused.value.data == {"uri": "test://static-text",
                                  "alternatives": [qualified, "toolbridge://server/zzz/test://static-text"]}
    assert [c.uri for c in read.contents] == [qualified]
    embedded = prompt.messages[0].content
    assert isinstance(embedded, types.EmbeddedResource) and embedded.resource.uri == qualified
    block = result.content[0]
    assert isinstance(block, types.EmbeddedResource)
    assert block.resource.uri == "toolbridge://server/aaa/test://embedded-resource"
    assert {s.servers for s in harness.views.catalogs.shadowed()} == {("aaa", "zzz")}


@pytest.mark.anyio
async def test_status_lists_each_shadowed_uri_with_its_servers_and_the_qualified_forms(tmp_path: Path) -> None:
    fixture = UpstreamConfig(name="x", command=sys.executable, args=(str(FIXTURE),))
    config = Config(directory=tmp_path, upstreams={n: fixture.model_copy(update={"name": n}) for n in ("aaa", "zzz")})
    async with run_gateway(config) as gateway:
        with anyio.fail_after(30):
            await gateway.fleet.ready.wait()
        report = gateway.status()
    entry = next(e for e in report["shadowed_uris"] if e["uri"] == "test://static-text")
    assert entry["kind"] == "resource" and entry["servers"] == ["aaa", "zzz"]
    assert entry["reachable_as"] == [f"toolbridge://server/{s}/test://static-text" for s in ("aaa", "zzz")]
    assert report["shadowed_uris_total"] == len(report["shadowed_uris"]) >= 2


def test_toolbridge_status_prints_the_shadowed_uris(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "upstreams").mkdir()
    for name in ("aaa", "zzz"):
        (tmp_path / "upstreams" / f"{name}.yaml").write_text(f"command: {sys.executable}\nargs: ['{FIXTURE}']\n")
    assert cli.main(["status", "--config-dir", str(tmp_path), "--wait", "30"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("shadowed resource: ")]
    assert "shadowed resource: test://static-text is listed by aaa, zzz (reachable as toolbridge://server/aaa/"\
           "test://static-text, toolbridge://server/zzz/test://static-text)" in lines
