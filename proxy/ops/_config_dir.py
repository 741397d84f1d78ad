"""`toolbridge init` and `toolbridge import`: writing a config dir, never overwriting silently.

The example written by `init` ships inside the package (`proxy/example/`), so a `pip install`ed
toolbridge can start from nothing: a `toolsets.yaml` and one upstream that needs no credentials.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

from proxy.config import Imported, holds_literal_secret
from proxy.upstream import resolve_command

__all__ = ["EXAMPLE", "Written", "connect_hint", "init_config_dir", "write_upstreams"]

EXAMPLE = Path(__file__).resolve().parent.parent / "example"
_EXAMPLE_CORE = "core: [time__get_current_time]"
_UVX_TIME = "command: uvx\nargs: [mcp-server-time, "


@dataclass
class Written:
    """What a command wrote (for the user), and what it refused to (each a reason)."""

    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _write(target: Path, text: str, mode: int, force: bool, written: Written) -> None:
    if target.exists() and not force:
        written.problems.append(f"{target} exists; skipped (use --force to overwrite)")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(descriptor, mode)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    written.files.append(str(target) + (" (mode 0600: it holds a literal secret)" if mode == 0o600 else ""))


def write_upstreams(directory: Path, upstreams: dict[str, dict[str, Any]], force: bool = False,
                    written: Written | None = None) -> Written:
    """One `upstreams/<name>.yaml` per server; a file holding a literal secret (an env or header value
    that is not a `${…}` reference) is written readable by its owner only."""
    written = Written() if written is None else written
    for name, settings in sorted(upstreams.items()):
        mode = 0o600 if holds_literal_secret(settings) else 0o644
        _write(directory / "upstreams" / f"{name}.yaml", yaml.safe_dump(settings, sort_keys=False), mode, force,
               written)
    return written


def _example_upstream() -> str:
    """The example server, run by `uvx` unless only an installed `mcp-server-time` would work."""
    text = (EXAMPLE / "upstreams" / "time.yaml").read_text(encoding="utf-8")
    if resolve_command("uvx") is None and resolve_command("mcp-server-time") is not None:
        text = text.replace(_UVX_TIME, "command: mcp-server-time\nargs: [")
    return text


def init_config_dir(directory: Path, imported: Imported | None = None, force: bool = False) -> Written:
    """Write `toolsets.yaml` and either the example upstream or the servers of an imported client config."""
    written = Written()
    settings = (EXAMPLE / "toolsets.yaml").read_text(encoding="utf-8")
    if imported is not None:  # the example's core tool belongs to the example server
        settings = settings.replace(_EXAMPLE_CORE, "core: []")
    _write(directory / "toolsets.yaml", settings, 0o644, force, written)
    if imported is None:
        _write(directory / "upstreams" / "time.yaml", _example_upstream(), 0o644, force, written)
    else:
        write_upstreams(directory, imported.upstreams, force, written)
    return written


def _ephemeral_runner() -> str | None:
    """`uvx` or `pipx` when this toolbridge runs from an environment that tool made for one run (uv's
    cache, pipx's `.cache`), which it may delete at any time; None for a lasting install."""
    prefix = Path(sys.prefix).resolve().as_posix() + "/"
    uv_cache = os.environ.get("UV_CACHE_DIR")
    if re.search(r"/uv/archive-v\d+/|/\.cache/uv/", prefix) or (
            uv_cache and prefix.startswith(Path(uv_cache).resolve().as_posix() + "/")):
        return "uvx"
    if "/pipx/.cache/" in prefix:
        return "pipx"
    return None


def _source() -> str:
    """What this toolbridge was installed from: the wheel, directory or URL it records (PEP 610), else its name."""
    try:
        recorded = importlib.metadata.distribution("toolbridge").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        recorded = None
    url = str(json.loads(recorded).get("url", "")) if recorded else ""
    return unquote(urlsplit(url).path) if url.startswith("file://") else url or "toolbridge"


def _launcher() -> tuple[list[str], str]:
    """How a client should start this toolbridge, and a note on why: by absolute path, as clients do not
    activate venvs; through `uvx`/`pipx run` again when this one runs from their throwaway environment."""
    runner = _ephemeral_runner()
    if runner is not None:
        source = _source()
        command = resolve_command(runner) or runner
        launch = [command, "--from", source, "toolbridge"] if runner == "uvx" else [
            command, "run", "--spec", source, "toolbridge"]
        return launch, (f"Note: this toolbridge runs from {runner}'s cache ({sys.prefix}), which {runner} may delete; "
                        f"the entries below start it with `{runner}` instead. To run an installed one, "
                        f"`uv tool install {source}` or `pipx install {source}`, then use its path.\n")
    found = resolve_command("toolbridge")
    return ([str(Path(found).absolute())] if found else [sys.executable, "-m", "proxy"]), ""


def connect_hint(directory: Path) -> str:
    """The next step after `init`: the client config entries that serve this config dir."""
    launch, note = _launcher()
    command, *args = [*launch, "serve", "--config-dir", str(directory)]
    entry = json.dumps({"mcpServers": {"toolbridge": {"command": command, "args": args}}})
    check = " ".join([*launch, "check", "--config-dir", str(directory)])
    return (f"\n{note}Next: `{check}`, then connect a client.\n"
            f"  Claude Desktop, Cursor (mcpServers) or VS Code (rename the key to \"servers\"):\n    {entry}\n"
            f"  Claude Code:\n    claude mcp add toolbridge -- {' '.join([command, *args])}")
