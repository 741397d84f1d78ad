"""URI ownership across servers: the server that listed a URI first owns it, whatever the names."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import anyio
import pytest
from inprocess import gateway
from mcp import Client, types
from servers.conformance_fixture import build_server

from proxy import cli
from proxy.app import run_gateway
from proxy.catalogs import Catalogs, Shadowed
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


def test_a_server_named_to_sort_first_does_not_take_over_a_uri_listed_before(caplog: pytest.LogCaptureFixture) -> None:
    catalogs = Catalogs(Registry())
    listing(catalogs, "zzz", URI, templates=(TEMPLATE,))
    with caplog.at_level(logging.WARNING, logger="proxy.catalogs"):
        listing(catalogs, "aaa", URI, templates=(TEMPLATE,))
    view = catalogs.view(["aaa", "zzz"])
    assert view.route_uri(URI) == ("zzz", URI)
    assert view.route_uri("file:///home/bob/notes") == ("zzz", "file:///home/bob/notes")
    assert view.route_uri(f"toolbridge://server/aaa/{URI}") == ("aaa", URI)
    assert [r.uri for r in view.resources] == [f"toolbridge://server/aaa/{URI}", URI]
    assert [r.name for r in view.resources] == [f"aaa {URI}", f"zzz {URI}"]
    assert [t.uri_template for t in view.templates] == [f"toolbridge://server/aaa/{TEMPLATE}", TEMPLATE]
    assert catalogs.shadowed() == [Shadowed(URI, "resource", "zzz", ("aaa",)),
                                   Shadowed(TEMPLATE, "template", "zzz", ("aaa",))]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"servers zzz and aaa both list the resource {URI!r}: zzz listed it first" in w for w in warnings)


def test_an_overlapping_template_listed_later_does_not_capture_the_earlier_ones_uris() -> None:
    catalogs = Catalogs(Registry())
    listing(catalogs, "notes", templates=(TEMPLATE,))
    listing(catalogs, "aaa", templates=("file:///{+path}",))
    view = catalogs.view(["aaa", "notes"])
    assert view.route_uri("file:///home/bob/notes") == ("notes", "file:///home/bob/notes")
    assert view.route_uri("file:///etc/passwd") == ("aaa", "file:///etc/passwd")


def test_the_first_lister_keeps_its_uri_through_a_relisting_and_a_reconnect() -> None:
    catalogs = Catalogs(Registry())
    listing(catalogs, "zzz", URI)
    listing(catalogs, "aaa", URI)
    listing(catalogs, "zzz", URI, "file:///other")  # relisted with more: the claim keeps its time
    assert catalogs.view(["aaa", "zzz"]).route_uri(URI) == ("zzz", URI)
    catalogs.remove_server("zzz")  # gone for now: the other copy serves meanwhile
    assert catalogs.view(["aaa", "zzz"]).route_uri(URI) == ("aaa", URI)
    assert catalogs.shadowed() == []
    listing(catalogs, "zzz", URI)  # back: its claim is older than aaa's
    assert catalogs.view(["aaa", "zzz"]).route_uri(URI) == ("zzz", URI)
    listing(catalogs, "zzz", "file:///other")  # relisted without it: the claim goes
    listing(catalogs, "zzz", URI)  # listed again: now after aaa
    assert catalogs.view(["aaa", "zzz"]).route_uri(URI) == ("aaa", URI)


def test_a_session_whose_scope_lacks_the_first_lister_gets_the_next() -> None:
    catalogs = Catalogs(Registry())
    listing(catalogs, "zzz", URI)
    listing(catalogs, "aaa", URI)
    view = catalogs.view(["aaa"])
    assert view.route_uri(URI) == ("aaa", URI) and [r.uri for r in view.resources] == [URI]


@pytest.mark.anyio
async def test_through_the_gateway_the_later_lister_named_aaa_gets_the_qualified_form() -> None:
    async with gateway([], servers={"zzz": build_server(), "aaa": build_server()}) as harness, \
            Client(harness.server, mode="legacy") as client:
        uris = [r.uri for r in (await client.list_resources()).resources]
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    assert "test://static-text" in uris and "toolbridge://server/aaa/test://static-text" in uris
    assert "toolbridge://server/zzz/test://static-text" not in uris
    assert "toolbridge://server/aaa/test://template/{id}/data" in templates
    assert harness.views.catalogs.shadowed()[0].owner == "zzz"


@pytest.mark.anyio
async def test_status_lists_each_shadowed_uri_with_its_owner_and_the_qualified_forms(tmp_path: Path) -> None:
    fixture = UpstreamConfig(name="x", command=sys.executable, args=(str(FIXTURE),))
    config = Config(directory=tmp_path, upstreams={n: fixture.model_copy(update={"name": n}) for n in ("aaa", "zzz")})
    async with run_gateway(config) as gateway:
        with anyio.fail_after(30):
            await gateway.fleet.ready.wait()
        report = gateway.status()
    entry = next(e for e in report["shadowed_uris"] if e["uri"] == "test://static-text")
    assert entry["kind"] == "resource" and {entry["owner"], *entry["shadowed"]} == {"aaa", "zzz"}
    assert entry["reachable_as"] == [f"toolbridge://server/{entry['shadowed'][0]}/test://static-text"]
    assert report["shadowed_uris_total"] == len(report["shadowed_uris"]) >= 2


def test_toolbridge_status_prints_the_shadowed_uris(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "upstreams").mkdir()
    for name in ("aaa", "zzz"):
        (tmp_path / "upstreams" / f"{name}.yaml").write_text(f"command: {sys.executable}\nargs: ['{FIXTURE}']\n")
    assert cli.main(["status", "--config-dir", str(tmp_path), "--wait", "30"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("shadowed resource: ")]
    assert any(line.startswith("shadowed resource: test://static-text is ") and "reachable as toolbridge://server/"
               in line for line in lines)
