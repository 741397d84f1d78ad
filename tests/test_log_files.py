"""Log files that may hold secrets are readable by their owner only: a stdio child's stderr
(`logs/<server>.log`, it may print its credentials) and the audit log, after rotation too."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import anyio
import pytest
from servers.harness import running_fleet

from proxy.config import AuditConfig, UpstreamConfig
from proxy.downstream import CallRecord
from proxy.ops import AuditLog

pytestmark = pytest.mark.anyio

FORGER = str(Path(__file__).parent / "servers" / "forger.py")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_child_logs_are_0600_also_when_an_older_log_was_readable_by_all(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "old.log").write_text("from an older run\n")
    (logs / "old.log").chmod(0o644)
    upstreams = [UpstreamConfig(name=name, command=sys.executable, args=(FORGER,), env={"API_TOKEN": "k"})
                 for name in ("old", "new")]
    async with running_fleet(upstreams, tmp_path) as (fleet, _):
        with anyio.fail_after(20):
            await fleet.ready.wait()
            while not all("boom" in (logs / f"{name}.log").read_text() for name in ("old", "new")):
                await anyio.sleep(0.05)  # the child writes its stderr in its own time
    assert (mode_of(logs / "old.log"), mode_of(logs / "new.log")) == (0o600, 0o600)
    assert (logs / "old.log").read_text().startswith("from an older run\n")  # appended, not replaced


def test_the_audit_log_stays_0600_across_rotations(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path, AuditConfig(max_bytes=300, backups=2))
    record = CallRecord(started=0.0, duration=0.001, session="s", principal="local", profile="default", client="c",
                        client_version="1", tool="a__t", server="a", via=None, outcome="ok", error=None, arguments={})
    for _ in range(10):
        audit.record(record)
    audit.close()
    files = sorted((tmp_path / "logs").glob("audit.jsonl*"))
    assert len(files) == 3 and {mode_of(path) for path in files} == {0o600}
