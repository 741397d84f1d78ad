"""Test helpers: upstream configs for the controllable server, a running fleet, process trees."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from proxy.config import UpstreamConfig
from proxy.registry import Registry
from proxy.upstream import Fleet, FleetSettings

CONTROLLABLE = str(Path(__file__).with_name("controllable.py"))
TINY = str(Path(__file__).with_name("tiny.py"))


def stdio_config(name: str, *flags: str, **settings: Any) -> UpstreamConfig:
    """The controllable server as a stdio upstream, run by this interpreter."""
    return UpstreamConfig(name=name, command=sys.executable, args=(CONTROLLABLE, *flags), **settings)


def tiny_config(name: str, *flags: str, **settings: Any) -> UpstreamConfig:
    """The dependency-free handshake-only server as a stdio upstream (starts in ~30 ms)."""
    return UpstreamConfig(name=name, command=sys.executable, args=(TINY, *flags), **settings)


@asynccontextmanager
async def running_fleet(
    upstreams: list[UpstreamConfig], tmp_path: Path, registry: Registry | None = None, **options: Any
) -> AsyncIterator[tuple[Fleet, Registry]]:
    """Run a fleet in a task group for the body's duration, then cancel it (as shutdown does)."""
    registry = registry if registry is not None else Registry()
    wiring = {key: options.pop(key) for key in ("catalogs", "notices", "cache", "gate") if key in options}
    settings = FleetSettings(tmp_path, tmp_path / "logs", **options)
    fleet = Fleet({u.name: u for u in upstreams}, registry, settings, **wiring)
    async with anyio.create_task_group() as tg:
        await tg.start(fleet.run)
        yield fleet, registry
        tg.cancel_scope.cancel()


async def wait_for(condition: Callable[[], bool], registry: Registry | None = None, poll: float = 0.02) -> None:
    """Wait until `condition()` holds: on registry changes when given, else by polling.

    Bound it with `anyio.fail_after`.
    """
    while not condition():
        if registry is not None:
            await registry.wait_for_change(registry.generation)
        else:
            await anyio.sleep(poll)


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of a process, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0]


def descendants(root: int | None = None) -> set[int]:
    """Every live or zombie descendant of `root` (default: this process), from /proc."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True while the pid exists at all (a zombie counts: someone failed to reap it)."""
    return _stat(pid) is not None
