"""What each upstream tool looked like when it was trusted: one hash per tool, kept on disk.

A tool's fingerprint covers everything a model reads or relies on: name, title, description,
input and output schemas, annotations. `<config dir>/.toolbridge/fingerprints.json` holds, per
server, the approved fingerprints and the changes awaiting approval. The serving proxy and
`toolbridge approve` both write it, each change a read-modify-write under an exclusive lock
(`fcntl.flock` on a lock file beside it) and an atomic replace, so neither loses the other's.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcp import types

__all__ = ["FingerprintStore", "Pending", "ServerPrints", "fingerprint", "fingerprints"]

logger = logging.getLogger(__name__)

FORMAT = 1
_FIELDS = {"name", "title", "description", "input_schema", "output_schema", "annotations"}


def fingerprint(tool: types.Tool) -> str:
    wire = tool.model_dump(include=_FIELDS, by_alias=True, exclude_none=True, mode="json")
    canonical = json.dumps(wire, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def fingerprints(tools: Iterable[types.Tool]) -> dict[str, str]:
    """Raw tool name → fingerprint (the first of two tools of one name counts)."""
    found: dict[str, str] = {}
    for tool in tools:
        found.setdefault(tool.name, fingerprint(tool))
    return found


@dataclass(frozen=True)
class Pending:
    """A definition not yet approved: `changed` from an approved one, or `new` on a pinned server."""

    fingerprint: str
    kind: Literal["changed", "new"]
    seen: str  # when it was first seen, ISO 8601 UTC


@dataclass
class ServerPrints:
    approved: dict[str, str] = field(default_factory=dict)
    pending: dict[str, Pending] = field(default_factory=dict)


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class FingerprintStore:
    """The file, read whole and written whole; an unreadable one is empty (logged), never an error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, ServerPrints]:
        try:
            document = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("tool fingerprints %s unreadable (%s): every server is seen anew", self.path, exc)
            return {}
        try:
            return _parse(document)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            logger.warning("tool fingerprints %s invalid (%s): every server is seen anew", self.path,
                           type(exc).__name__)
            return {}

    def update(self, change: Callable[[dict[str, ServerPrints]], Any]) -> Any:
        """Apply `change` to the current contents under the lock and write what changed; returns its result."""
        with self._locked():
            servers = self.load()
            before = _document(servers)
            result = change(servers)
            after = _document(servers)
            if after != before:
                self._write(after)
        return result

    def approve(self, server: str, tools: Iterable[str] = ()) -> list[str]:
        """Make the pending definitions of `tools` (all of the server's when empty) the approved ones.

        Raises:
            KeyError: a named tool has no pending change (its name in the message).
        """
        def apply(servers: dict[str, ServerPrints]) -> list[str]:
            entry = servers.get(server, ServerPrints())
            chosen = list(tools) or sorted(entry.pending)
            unknown = [name for name in chosen if name not in entry.pending]
            if unknown:
                raise KeyError(", ".join(unknown))
            for name in chosen:
                entry.approved[name] = entry.pending.pop(name).fingerprint
            return chosen

        return self.update(apply)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, document: dict[str, Any]) -> None:
        with tempfile.NamedTemporaryFile("w", dir=self.path.parent, prefix=".tmp-", suffix=".json",
                                         delete=False, encoding="utf-8") as handle:
            json.dump(document, handle, indent=1, ensure_ascii=False)
        os.replace(handle.name, self.path)


def _document(servers: dict[str, ServerPrints]) -> dict[str, Any]:
    return {"format": FORMAT, "servers": {
        name: {"approved": dict(sorted(entry.approved.items())),
               "pending": {tool: {"fingerprint": p.fingerprint, "kind": p.kind, "seen": p.seen}
                           for tool, p in sorted(entry.pending.items())}}
        for name, entry in sorted(servers.items())}}


def _parse(document: Any) -> dict[str, ServerPrints]:
    """Raises: KeyError, TypeError, ValueError or AttributeError on a document of another shape."""
    if document.get("format") != FORMAT:
        raise ValueError("format")
    servers = {}
    for name, entry in document["servers"].items():
        approved = {str(tool): str(value) for tool, value in entry["approved"].items()}
        pending = {str(tool): Pending(str(p["fingerprint"]), "new" if p["kind"] == "new" else "changed",
                                      str(p["seen"]))
                   for tool, p in entry["pending"].items()}
        servers[str(name)] = ServerPrints(approved, pending)
    return servers
