"""MCP Apps (`io.modelcontextprotocol/ui`) references as they cross toolbridge: `ui://` URIs per server.

An upstream's `ui://<rest>` is shown downstream as `ui://<server>/<rest>`: the scheme hosts require
is kept, and two servers' `ui://app/index.html` stay apart. A server name never holds a `/`
(`[A-Za-z0-9_-]`), so the first segment after the scheme names the owner without ambiguity;
`ui_original` only accepts it when it is one of the servers it is given, it never guesses.

Everything here reads upstream data, which is hostile: only string values that start with `ui://`
are rewritten, and a `visibility` that is not a list of strings counts as the default.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any, Literal

from mcp import types

__all__ = [
    "APP_MIME_TYPE",
    "UI_EXTENSION",
    "AppRole",
    "app_role",
    "rewrite_ui_meta",
    "rewrite_ui_read",
    "rewrite_ui_result",
    "ui_namespaced",
    "ui_original",
]

UI_EXTENSION = "io.modelcontextprotocol/ui"
APP_MIME_TYPE = "text/html;profile=mcp-app"
UI_SCHEME = "ui://"
FLAT_KEY = "ui/resourceUri"  # the flat spelling earlier ext-apps SDKs still write next to `ui.resourceUri`

AppRole = Literal["ui", "app", "model"]
"""What a tool is to MCP Apps: `ui` has a UI the model may open, `app` is callable by apps only,
`model` may not be called by apps; a tool without `_meta.ui` has no role (None)."""


def ui_namespaced(server: str, uri: str) -> str:
    """The downstream form of `server`'s `uri`; anything but a `ui://` URI is left as it is."""
    if not uri.startswith(UI_SCHEME):
        return uri
    return f"{UI_SCHEME}{server}/{uri[len(UI_SCHEME):]}"


def ui_original(uri: str, servers: Container[str]) -> tuple[str, str] | None:
    """(server, upstream URI) for a namespaced `ui://` URI of one of `servers`; else None."""
    if not uri.startswith(UI_SCHEME):
        return None
    server, slash, rest = uri[len(UI_SCHEME):].partition("/")
    if not slash or not server or server not in servers:
        return None
    return server, UI_SCHEME + rest


def _ui(meta: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    return ui if isinstance(ui, Mapping) else None


def rewrite_ui_meta(meta: dict[str, Any] | None, server: str) -> dict[str, Any] | None:
    """`meta` with its `ui.resourceUri` (and the flat `ui/resourceUri`) namespaced; a copy when changed."""
    if not isinstance(meta, dict):
        return meta
    ui = _ui(meta)
    rewritten = dict(meta)
    if ui is not None and isinstance(ui.get("resourceUri"), str):
        rewritten["ui"] = {**ui, "resourceUri": ui_namespaced(server, ui["resourceUri"])}
    if isinstance(meta.get(FLAT_KEY), str):
        rewritten[FLAT_KEY] = ui_namespaced(server, meta[FLAT_KEY])
    return rewritten if rewritten != meta else meta


def app_role(meta: Mapping[str, Any] | None) -> AppRole | None:
    """The tool's role from its `_meta.ui` (visibility defaults to `["model", "app"]`)."""
    ui = _ui(meta)
    has_ui = (ui is not None and isinstance(ui.get("resourceUri"), str)) or (
        isinstance(meta, Mapping) and isinstance(meta.get(FLAT_KEY), str))
    if ui is None and not has_ui:
        return None
    visibility = ui.get("visibility") if ui is not None else None
    if not isinstance(visibility, list) or not all(isinstance(v, str) for v in visibility):
        visibility = ["model", "app"]
    if "model" not in visibility:
        return "app"
    if "app" not in visibility:
        return "model"
    return "ui" if has_ui else None


def _block(block: types.ContentBlock, server: str) -> types.ContentBlock:
    if isinstance(block, types.ResourceLink) and block.uri.startswith(UI_SCHEME):
        uri = ui_namespaced(server, block.uri)
        return block.model_copy(update={"uri": uri, "meta": rewrite_ui_meta(block.meta, server)})
    if isinstance(block, types.EmbeddedResource) and block.resource.uri.startswith(UI_SCHEME):
        resource = block.resource.model_copy(update={"uri": ui_namespaced(server, block.resource.uri)})
        return block.model_copy(update={"resource": resource})
    return block


def rewrite_ui_result(result: types.CallToolResult, server: str) -> types.CallToolResult:
    """A tool result with its `_meta.ui.resourceUri` and `ui://` resource links namespaced (in place)."""
    result.meta = rewrite_ui_meta(result.meta, server)
    result.content = [_block(block, server) for block in result.content]
    return result


def rewrite_ui_read(result: types.ReadResourceResult, server: str) -> types.ReadResourceResult:
    """A read's contents under the URIs the session asked by; the text, mime type and `_meta` (CSP) as sent."""
    result.contents = [content.model_copy(update={"uri": ui_namespaced(server, content.uri)})
                       if content.uri.startswith(UI_SCHEME) else content for content in result.contents]
    return result
