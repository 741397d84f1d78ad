"""The audit log: one JSON line per tool call and per tool definition change, rotated, never a secret."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

from proxy.config import AuditConfig
from proxy.downstream import CallRecord
from proxy.errors import redact
from proxy.text import clean
from proxy.upstream import ToolChange

__all__ = ["AuditLog", "argument_digest", "latest_records"]

TAIL_BYTES = 1 << 20  # what `latest_records` reads from the end of the log: thousands of records


def argument_digest(arguments: Any) -> str:
    """A stable hash of the arguments: equal calls can be matched without storing what was sent."""
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class _PrivateRotatingHandler(RotatingFileHandler):
    """Each file it opens after a rotation is created 0600 too (backups are renames: they keep it)."""

    def _open(self) -> Any:
        return open(self.baseFilename, self.mode, encoding=self.encoding, errors=self.errors,
                    opener=lambda path, flags: os.open(path, flags, 0o600))


class AuditLog:
    """Writes `CallRecord`s to `<config dir>/<path>` as JSON lines (mode 0600, rotated by size)."""

    def __init__(self, config_dir: Path, settings: AuditConfig) -> None:
        path = Path(settings.path) if Path(settings.path).is_absolute() else config_dir / settings.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        os.chmod(path, 0o600)
        self.path = path
        self.arguments = settings.arguments
        self._handler = _PrivateRotatingHandler(path, maxBytes=settings.max_bytes, backupCount=settings.backups,
                                                encoding="utf-8")
        self._logger = logging.Logger(f"toolbridge.audit.{path}")  # not in the logging tree: never on stderr
        self._logger.addHandler(self._handler)

    def record(self, call: CallRecord) -> None:
        entry: dict[str, Any] = {
            "time": call.started,
            "session": call.session,
            "principal": call.principal,
            "profile": call.profile,
            "client": call.client,
            "client_version": call.client_version,
            "tool": call.tool,
            "server": call.server,
            "via": call.via,
            "duration_ms": round(call.duration * 1000, 3),
            "outcome": call.outcome,
            "error": call.error,
        }
        if self.arguments == "hash":
            entry["arguments"] = argument_digest(call.arguments)
        elif self.arguments == "full":
            entry["arguments"] = call.arguments
        self._logger.info(redact(json.dumps(entry, ensure_ascii=False, default=str)))

    def record_tool_change(self, change: ToolChange) -> None:
        """A tool definition that differs from the approved one (rug-pull detection, docs/integrity.md)."""
        entry = {"time": time.time(), "event": "tool_definition_changed", "server": change.server,
                 "tool": clean(change.tool), "kind": change.kind, "approved": change.approved,
                 "fingerprint": change.fingerprint, "held": change.held}
        self._logger.info(redact(json.dumps(entry, ensure_ascii=False)))

    def close(self) -> None:
        self._handler.close()


def latest_records(path: Path, limit: int, **wanted: str) -> list[dict[str, Any]]:
    """The newest `limit` records of the current log file, newest first, whose fields equal `wanted`
    (e.g. `server="ctl"`); an empty value matches anything. Reads only the file's last `TAIL_BYTES`."""
    wanted = {key: value for key, value in wanted.items() if value}
    try:
        with path.open("rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - TAIL_BYTES))
            lines = file.read().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return []
    found: list[dict[str, Any]] = []
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the first, cut line of the tail; or a line being written
        if isinstance(record, dict) and all(record.get(key) == value for key, value in wanted.items()):
            found.append(record)
            if len(found) == limit:
                break
    return found
