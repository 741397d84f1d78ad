"""A stdio server that dies at start is reported with the last line it wrote to stderr."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from servers.harness import running_fleet

from proxy.config import UpstreamConfig
from proxy.upstream import UpstreamState

pytestmark = pytest.mark.anyio

DIES = "import sys; print('starting up', file=sys.stderr); print('fatal: FOO_API_KEY is not set\\x1b[31m', " \
       "file=sys.stderr); sys.exit(1)"


@pytest.mark.parametrize(("script", "said"), [
    (DIES, ": fatal: FOO_API_KEY is not set\ufffd[31m; see "),
    ("import sys; sys.exit(1)", " (it wrote nothing to stderr); see "),
])
async def test_status_of_a_server_that_died_at_start_quotes_its_last_stderr_line(
        tmp_path: Path, script: str, said: str) -> None:
    upstream = UpstreamConfig(name="dies", command=sys.executable, args=("-c", script))
    async with running_fleet([upstream], tmp_path, park_after=2, reprobe=60) as (fleet, _):
        with anyio.fail_after(20):
            await fleet.wait_state("dies", UpstreamState.BACKOFF)
        (status,) = fleet.status()
    assert f"the process exited during startup{said}{tmp_path / 'logs' / 'dies.log'}" in (status.reason or "")
