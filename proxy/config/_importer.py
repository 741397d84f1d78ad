"""`toolbridge import`: turn a client's MCP config into `upstreams/<name>.yaml` files.

Reads the `mcpServers` map (Claude Desktop, Claude Code `.mcp.json`, Cursor) or the `servers`
map (VS Code `mcp.json`). Pure: JSON-like data in, upstream settings out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.names import sanitize

_REMOTE_TYPES = {"http": "streamable-http", "streamable-http": "streamable-http", "streamableHttp": "streamable-http",
                 "sse": "sse"}


def _upstream(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One client entry as upstream settings.

    Raises:
        ValueError: the entry has neither a command nor a URL.
    """
    settings: dict[str, Any] = {}
    if entry.get("command"):
        settings["command"] = str(entry["command"])
        if entry.get("args"):
            settings["args"] = [str(a) for a in entry["args"]]
        if entry.get("env"):
            settings["env"] = {str(k): str(v) for k, v in entry["env"].items()}
        if entry.get("cwd"):
            settings["cwd"] = str(entry["cwd"])
    elif entry.get("url") or entry.get("serverUrl"):
        settings["url"] = str(entry.get("url") or entry.get("serverUrl"))
        transport = _REMOTE_TYPES.get(str(entry.get("type") or entry.get("transport") or "http"))
        if transport == "sse":
            settings["transport"] = "sse"
        if entry.get("headers"):
            settings["headers"] = {str(k): str(v) for k, v in entry["headers"].items()}
    else:
        raise ValueError("neither 'command' nor 'url'")
    if entry.get("disabled") is True:
        settings["enabled"] = False
    return settings


def convert_client_config(document: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Upstream settings by server name, and one message per entry that could not be converted."""
    if not isinstance(document, Mapping):
        return {}, ["the file is not a JSON object"]
    servers = document.get("mcpServers", document.get("servers"))
    if not isinstance(servers, Mapping):
        return {}, ["no 'mcpServers' or 'servers' map found"]
    converted: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for raw_name, entry in servers.items():
        name = sanitize(str(raw_name))[:64] or "server"
        if name in converted:
            problems.append(f"{raw_name}: another server is already named {name!r}; skipped")
            continue
        if not isinstance(entry, Mapping):
            problems.append(f"{raw_name}: not an object; skipped")
            continue
        try:
            converted[name] = _upstream(entry)
        except ValueError as exc:
            problems.append(f"{raw_name}: {exc}; skipped")
    return converted, problems
