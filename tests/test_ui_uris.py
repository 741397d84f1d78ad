"""The pure side of MCP Apps: `ui://` namespacing, its reversal, `_meta` rewriting and tool roles, on
well-formed and hostile upstream data."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types

from proxy.protocol import app_role, rewrite_ui_meta, rewrite_ui_read, rewrite_ui_result, ui_namespaced, ui_original


@pytest.mark.parametrize("uri", ["ui://app/index.html", "ui://", "ui://a/b/c?x=1#f", "ui://é/✓"])
def test_a_namespaced_ui_uri_goes_back_to_its_server_and_original(uri: str) -> None:
    shown = ui_namespaced("srv", uri)
    assert shown.startswith("ui://srv/") and ui_original(shown, {"srv", "other"}) == ("srv", uri)


@pytest.mark.parametrize("uri", ["ui://srv", "ui:///x", "ui://nobody/x", "test://srv/x", "UI://srv/x", ""])
def test_a_uri_that_names_no_known_server_routes_nowhere(uri: str) -> None:
    assert ui_original(uri, {"srv"}) is None


def test_only_ui_uris_are_namespaced() -> None:
    assert ui_namespaced("srv", "https://example.com/ui://x") == "https://example.com/ui://x"


@pytest.mark.parametrize(("meta", "expected"), [
    ({"ui": {"resourceUri": "ui://a/b"}}, {"ui": {"resourceUri": "ui://s/a/b"}}),
    ({"ui": {"resourceUri": "ui://a", "visibility": ["app"]}, "ui/resourceUri": "ui://a", "k": 1},
     {"ui": {"resourceUri": "ui://s/a", "visibility": ["app"]}, "ui/resourceUri": "ui://s/a", "k": 1}),
    ({"ui": {"resourceUri": "https://x"}}, {"ui": {"resourceUri": "https://x"}}),
    ({"ui": {"resourceUri": 7}}, {"ui": {"resourceUri": 7}}),
    ({"ui": "ui://a"}, {"ui": "ui://a"}),
    ({"ui": None, "ui/resourceUri": ["ui://a"]}, {"ui": None, "ui/resourceUri": ["ui://a"]}),
    (None, None),
])
def test_meta_rewriting_touches_only_ui_resource_uris(meta: Any, expected: Any) -> None:
    before = repr(meta)
    assert rewrite_ui_meta(meta, "s") == expected
    assert repr(meta) == before  # the upstream's dict is never changed in place


@pytest.mark.parametrize(("meta", "role"), [
    (None, None),
    ({}, None),
    ({"ui": {"resourceUri": "ui://a"}}, "ui"),
    ({"ui/resourceUri": "ui://a"}, "ui"),
    ({"ui": {"resourceUri": "ui://a", "visibility": ["app"]}}, "app"),
    ({"ui": {"visibility": ["app"]}}, "app"),
    ({"ui": {"resourceUri": "ui://a", "visibility": ["model"]}}, "model"),
    ({"ui": {"resourceUri": "ui://a", "visibility": ["model", "app"]}}, "ui"),
    ({"ui": {"resourceUri": "ui://a", "visibility": "app"}}, "ui"),  # not a list: the default
    ({"ui": {"resourceUri": "ui://a", "visibility": [1, "app"]}}, "ui"),
    ({"ui": {"visibility": []}}, "app"),  # visible to nobody: at least never shown to the model
    ({"ui": {}}, None),
    ({"ui": ["x"]}, None),
])
def test_a_tools_role_follows_its_ui_meta_and_visibility(meta: Any, role: str | None) -> None:
    assert app_role(meta) == role


def test_results_and_reads_are_namespaced_in_links_embedded_resources_and_meta() -> None:
    embedded = types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="ui://a", text="<p>"))
    result = types.CallToolResult(content=[
        types.ResourceLink(name="l", uri="ui://a", _meta={"ui": {"resourceUri": "ui://a"}}),
        types.ResourceLink(name="other", uri="file:///a"), embedded, types.TextContent(type="text", text="ui://a"),
    ], _meta={"ui": {"resourceUri": "ui://a"}})
    rewritten = rewrite_ui_result(result, "s")
    dumped = rewritten.model_dump(by_alias=True, exclude_none=True)
    assert [block.get("uri") or block.get("resource", {}).get("uri") for block in dumped["content"]] == [
        "ui://s/a", "file:///a", "ui://s/a", None]
    assert dumped["content"][0]["_meta"] == dumped["_meta"] == {"ui": {"resourceUri": "ui://s/a"}}
    assert dumped["content"][3]["text"] == "ui://a"  # text is the model's business, never rewritten
    read = rewrite_ui_read(types.ReadResourceResult(contents=[
        types.TextResourceContents(uri="ui://a", text="x", mime_type="text/html;profile=mcp-app",
                                   _meta={"ui": {"csp": {"connectDomains": ["https://a"]}}}),
        types.BlobResourceContents(uri="test://b", blob="AA=="),
    ]), "s")
    assert [c.uri for c in read.contents] == ["ui://s/a", "test://b"]
    assert read.contents[0].meta == {"ui": {"csp": {"connectDomains": ["https://a"]}}}
