"""Noticing config edits: file events on `upstreams/` and `toolsets.yaml`, and SIGHUP.

Editors save in bursts (write a temp file, rename it over the old one); events are debounced so a
burst is one reload.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from pathlib import Path

import anyio
from watchfiles import Change

from proxy.config import on_file_changes

__all__ = ["reload_on_sighup", "watch_config"]

logger = logging.getLogger(__name__)

def _is_config_file(directory: Path) -> Callable[[Change, str], bool]:
    upstreams = directory / "upstreams"

    def relevant(_change: Change, path: str) -> bool:
        file = Path(path)
        if file == directory / "toolsets.yaml":
            return True
        return file.parent == upstreams and file.suffix in (".yaml", ".yml") and not file.name.startswith(".")

    return relevant


async def watch_config(directory: Path, reload: Callable[[], None]) -> None:
    """Call `reload` after each burst of changes to the config files, until cancelled."""
    directory = directory.resolve()
    (directory / "upstreams").mkdir(parents=True, exist_ok=True)
    paths = [directory, directory / "upstreams"]

    async def act() -> None:
        reload()

    await on_file_changes(paths, _is_config_file(directory), act)


async def reload_on_sighup(reload: Callable[[], None]) -> None:
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            logger.info("received SIGHUP; reloading the config")
            reload()
