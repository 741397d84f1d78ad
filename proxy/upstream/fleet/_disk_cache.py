"""Each upstream's last good catalog on disk, so a restart can list a fleet before it has started.

One JSON file per server, named by a hash of the config that decides what the server lists (its
command or URL, environment, headers and tool filter): change any of them and the old entry no
longer applies. The file is an object with one key per list (`tools` today; resources and prompts
can sit beside it), so older readers ignore what they do not know. A cache that cannot be read or
does not validate is a miss, never an error: the server is then started to find out.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from mcp import types
from pydantic import ValidationError

from proxy.config import UpstreamConfig

logger = logging.getLogger(__name__)

FORMAT = 1
# The settings that decide what a server lists; timeouts, `lazy` and `enabled` do not.
_IDENTITY = {"name", "command", "args", "env", "cwd", "url", "transport", "headers", "tools"}


def config_key(config: UpstreamConfig) -> str:
    """A stable hash of what decides the server's catalog (secrets go in hashed, never in clear)."""
    identity = config.model_dump(include=_IDENTITY, mode="json")
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


class DiskCatalogCache:
    """`<directory>/<server>.<config hash>.json`: the tools a server listed when it last connected."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, config: UpstreamConfig) -> Path:
        return self.directory / f"{config.name}.{config_key(config)}.json"

    def load(self, config: UpstreamConfig) -> list[types.Tool] | None:
        """The cached tools for exactly this config, or None when there are none usable."""
        path = self._path(config)
        try:
            document = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("server %s: catalog cache %s unreadable (%s); starting it to relist", config.name, path, exc)
            return None
        try:
            if not isinstance(document, dict) or document.get("format") != FORMAT:
                return None
            return [types.Tool.model_validate(tool) for tool in document["tools"]]
        except (KeyError, TypeError, ValidationError) as exc:
            logger.warning("server %s: catalog cache %s invalid (%s); starting it to relist", config.name, path,
                           type(exc).__name__)
            return None

    def store(self, config: UpstreamConfig, tools: Sequence[types.Tool]) -> None:
        """Replace the server's entry atomically and drop its entries for older configs; failures only log."""
        path = self._path(config)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.directory, prefix=".tmp-", suffix=".json",
                                             delete=False, encoding="utf-8") as handle:
                _write_document(handle, config.name, tools)
            os.replace(handle.name, path)
            for stale in self.directory.glob(f"{config.name}.*.json"):
                if stale != path:
                    stale.unlink(missing_ok=True)
        except OSError as exc:
            logger.warning("server %s: could not write the catalog cache %s: %s", config.name, path, exc)


def _write_document(handle: IO[str], server: str, tools: Sequence[types.Tool]) -> None:
    """`{"format", "server", "tools"}`, one tool at a time: a whole list's dump takes ~6 MB per 500 tools."""
    handle.write(json.dumps({"format": FORMAT, "server": server}, ensure_ascii=False, separators=(",", ":"))[:-1])
    handle.write(',"tools":[')
    for index, tool in enumerate(tools):
        wire = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        handle.write(("," if index else "") + json.dumps(wire, ensure_ascii=False, separators=(",", ":")))
    handle.write("]}")
