"""`toolbridge import`: turn a client's MCP config into `upstreams/<name>.yaml` files.

Reads the `mcpServers` map (Claude Desktop, Claude Code `.mcp.json`, Cursor), the `servers` map
(VS Code `mcp.json`) or VS Code's `settings.json` form (`{"mcp": {"servers": …}}`). Client
variables are converted where ours have an equivalent (`${VAR}`, `${env:VAR}`, `${VAR:-default}`
carry over; `${workspaceFolder}` and `${userHome}` become paths; `${input:id}` becomes `${ID}`),
and every conversion that changes meaning comes back as a warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from proxy.config._jsonc import loads_jsonc
from proxy.config._nesting import runs_toolbridge
from proxy.names import sanitize

_REMOTE_TYPES = {"http": "streamable-http", "streamable-http": "streamable-http", "streamableHttp": "streamable-http",
                 "sse": "sse"}
_CLIENT_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_OURS = re.compile(r"(?:env:)?[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?")
_REFERENCE_OR_SCHEME = re.compile(r"\$\{[^}]*\}|(?i:\b(?:bearer|basic|token)\b)")


@dataclass
class Imported:
    """Upstream settings by server name; problems (entries skipped) and warnings (entries converted)."""

    upstreams: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def holds_literal_secret(settings: Mapping[str, Any]) -> bool:
    """Whether an env or header value is written out rather than a `${…}` reference (file gets 0600)."""
    values = [*settings.get("env", {}).values(), *settings.get("headers", {}).values()]
    return any(_REFERENCE_OR_SCHEME.sub("", str(value)).strip() for value in values)


class _Variables:
    """Rewrites one server's client variables into ours, noting what it changed."""

    def __init__(self, server: str, workspace: Path | None, warnings: list[str]) -> None:
        self.server, self.workspace, self.warnings = server, workspace, warnings

    def __call__(self, text: str) -> str:
        return _CLIENT_VARIABLE.sub(self._one, text)

    def _one(self, match: re.Match[str]) -> str:
        inner = match.group(1)
        if inner == "workspaceFolder" and self.workspace is not None:
            self._warn(f"${{workspaceFolder}} written as {self.workspace}")
            return str(self.workspace)
        if inner == "userHome":
            return str(Path.home())
        if _OURS.fullmatch(inner):
            return match.group(0)
        if inner.startswith("input:"):
            name = sanitize(inner.removeprefix("input:")).replace("-", "_").upper() or "INPUT"
            self._warn(f"${{{inner}}} (a VS Code prompt) has no equivalent; set the environment variable {name}")
            return f"${{{name}}}"
        self._warn(f"${{{inner}}} has no equivalent; copied literally, edit the file")
        return match.group(0)

    def _warn(self, message: str) -> None:
        if (warning := f"{self.server}: {message}") not in self.warnings:
            self.warnings.append(warning)


def _read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines (`export`, quotes and `#` comments allowed), as VS Code's `envFile` reads them.

    Raises:
        OSError: the file cannot be read.
    """
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip().removeprefix("export ").strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values


def _strings(values: Mapping[Any, Any], rewrite: _Variables) -> dict[str, str]:
    return {str(k): rewrite(str(v)) for k, v in values.items()}


def _upstream(entry: Mapping[str, Any], rewrite: _Variables) -> dict[str, Any]:
    """One client entry as upstream settings.

    Raises:
        ValueError: the entry has neither a command nor a URL.
    """
    settings: dict[str, Any] = {}
    if entry.get("command"):
        settings["command"] = rewrite(str(entry["command"]))
        if entry.get("args"):
            settings["args"] = [rewrite(str(a)) for a in entry["args"]]
        env = _env(entry, rewrite)
        if env:
            settings["env"] = env
        if entry.get("cwd"):
            settings["cwd"] = rewrite(str(entry["cwd"]))
    elif entry.get("url") or entry.get("serverUrl"):
        settings["url"] = rewrite(str(entry.get("url") or entry.get("serverUrl")))
        given = entry.get("type") or entry.get("transport")
        transport = _REMOTE_TYPES.get(str(given or "http"))
        if given is None and urlsplit(settings["url"]).path.rstrip("/").endswith("/sse"):
            transport = "sse"  # Cursor infers SSE from the path; our default would be Streamable HTTP
            rewrite.warnings.append(f"{rewrite.server}: no 'type' and the URL ends in /sse: written as transport: sse")
        if transport == "sse":
            settings["transport"] = "sse"
        if isinstance(entry.get("headers"), Mapping) and entry["headers"]:
            settings["headers"] = _strings(entry["headers"], rewrite)
    else:
        raise ValueError("neither 'command' nor 'url'")
    if entry.get("disabled") is True:
        settings["enabled"] = False
    return settings


def _env(entry: Mapping[str, Any], rewrite: _Variables) -> dict[str, str]:
    """The entry's `envFile` read in, overridden by its `env` (as the client does)."""
    env: dict[str, str] = {}
    if entry.get("envFile"):
        path = Path(rewrite(str(entry["envFile"]))).expanduser()
        if not path.is_absolute() and rewrite.workspace is not None:
            path = rewrite.workspace / path
        try:
            env.update(_read_env_file(path))
            rewrite.warnings.append(f"{rewrite.server}: envFile {path} copied into env (the file holds its values)")
        except (OSError, UnicodeDecodeError) as exc:
            rewrite.warnings.append(f"{rewrite.server}: envFile {path} could not be read ({exc}); set those "
                                    "variables in env yourself")
    if isinstance(entry.get("env"), Mapping):
        env.update(_strings(entry["env"], rewrite))
    return env


def _servers(document: Mapping[str, Any]) -> Any:
    if "mcpServers" in document:
        return document["mcpServers"]
    if "servers" in document:
        return document["servers"]
    nested = document.get("mcp")
    return nested.get("servers") if isinstance(nested, Mapping) else None


def convert_client_config(document: Any, source: Path | None = None) -> Imported:
    """Convert a client config; `source` (the file read) locates `${workspaceFolder}` and `envFile`.

    The workspace is the folder holding `.vscode/`, or the file's own folder.
    """
    imported = Imported()
    if not isinstance(document, Mapping):
        imported.problems.append("the file is not a JSON object")
        return imported
    servers = _servers(document)
    if not isinstance(servers, Mapping):
        imported.problems.append("no 'mcpServers', 'servers' or 'mcp.servers' map found")
        return imported
    workspace = None
    if source is not None:
        folder = source.resolve().parent
        workspace = folder.parent if folder.name == ".vscode" else folder
    for raw_name, entry in servers.items():
        name = sanitize(str(raw_name))[:64] or "server"
        if name != raw_name:
            imported.warnings.append(f"{raw_name}: renamed {name!r} (a server name is [A-Za-z0-9_-], at most 64)")
        if name in imported.upstreams:
            imported.problems.append(f"{raw_name}: another server is already named {name!r}; skipped")
            continue
        if not isinstance(entry, Mapping):
            imported.problems.append(f"{raw_name}: not an object; skipped")
            continue
        if runs_toolbridge(str(entry.get("command") or ""), [str(arg) for arg in entry.get("args") or ()]):
            imported.warnings.append(f"{raw_name}: skipped: it runs toolbridge itself (as an upstream, toolbridge "
                                     "would start toolbridge, which starts it again)")
            continue
        try:
            imported.upstreams[name] = _upstream(entry, _Variables(name, workspace, imported.warnings))
        except ValueError as exc:
            imported.problems.append(f"{raw_name}: {exc}; skipped")
    return imported


def import_client_config(file: Path) -> Imported:
    """`convert_client_config` of a file (JSON, or JSONC as VS Code writes it); a file that cannot be read
    or parsed is the one problem."""
    try:
        document = loads_jsonc(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return Imported(problems=[f"{file}: {exc}"])
    return convert_client_config(document, file)
