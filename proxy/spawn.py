"""Stdio upstream processes: spawned by the SDK, logged to a file, and swept on exit.

The SDK ends a child by closing stdin, then SIGTERM, then SIGKILL of its process group, but it
never exposes the child's pid. We record it at spawn time so that whatever is left of the group
(grandchildren that ignored the signals) can be killed after the SDK's own shutdown.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import mcp.client.stdio as sdk_stdio
from mcp import StdioServerParameters

from proxy.config import UpstreamConfig
from proxy.upstream_errors import UpstreamRefused


def resolve_command(command: str) -> str | None:
    """Find `command` on PATH, then next to the running interpreter (the venv's bin/)."""
    return shutil.which(command) or shutil.which(command, path=str(Path(sys.executable).parent))


_SPAWNED: ContextVar[list[int] | None] = ContextVar("toolbridge_spawned", default=None)
_sdk_spawn = getattr(sdk_stdio, "_create_platform_compatible_process", None)


async def _recording_spawn(*args: Any, **kwargs: Any) -> Any:
    """Remember each child's pid (= its process group) so leftovers can be swept after exit."""
    assert _sdk_spawn is not None
    process = await _sdk_spawn(*args, **kwargs)
    spawned = _SPAWNED.get()
    if spawned is not None:
        spawned.append(process.pid)
    return process


if _sdk_spawn is not None:  # the SDK exposes no pid; without this hook only the sweep is lost
    sdk_stdio._create_platform_compatible_process = _recording_spawn  # type: ignore[attr-defined]


def _sweep_groups(pgids: Iterable[int]) -> None:
    """Kill what is left of each child's group: grandchildren the SDK's shutdown did not reach."""
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _stdio_params(config: UpstreamConfig, config_dir: Path) -> StdioServerParameters:
    assert config.command is not None
    command = resolve_command(config.command)
    if command is None:
        raise UpstreamRefused(config.name, f"command not found: {config.command!r} (PATH and {sys.prefix}/bin)")
    cwd = None
    if config.cwd is not None:
        cwd = Path(config.cwd) if Path(config.cwd).is_absolute() else config_dir / config.cwd
        if not cwd.is_dir():
            raise UpstreamRefused(config.name, f"working directory does not exist: {cwd}")
    return StdioServerParameters(command=command, args=list(config.args), env=dict(config.env) or None, cwd=cwd)


@asynccontextmanager
async def stdio_transport(config: UpstreamConfig, config_dir: Path, log_dir: Path) -> AsyncIterator[Any]:
    """The SDK's stdio transport, with the child's stderr appended to `<log_dir>/<server>.log`."""
    params = _stdio_params(config, config_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    spawned: list[int] = []
    _SPAWNED.set(spawned)
    with open(log_dir / f"{config.name}.log", "a", encoding="utf-8") as errlog:
        errlog.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {params.command}\n")
        errlog.flush()
        try:
            async with sdk_stdio.stdio_client(params, errlog=errlog) as streams:
                yield streams
        finally:
            _sweep_groups(spawned)


