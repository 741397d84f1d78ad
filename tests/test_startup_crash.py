"""A stdio server that dies at start is reported with the line of its stderr that says why."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from servers.harness import running_fleet

from proxy.config import UpstreamConfig
from proxy.upstream import UpstreamState
from proxy.upstream.connection._connect import telling_line

pytestmark = pytest.mark.anyio

DIES = "import sys; print('starting up', file=sys.stderr); print('fatal: FOO_API_KEY is not set\\x1b[31m', " \
       "file=sys.stderr); sys.exit(1)"


@pytest.mark.parametrize(("script", "said"), [
    (DIES, ": fatal: FOO_API_KEY is not set\ufffd[31m; see "),
    ("import sys, json; print('Error: no API key', file=sys.stderr); print(json.dumps({'a': 1}, indent=2), "
     "file=sys.stderr); sys.exit(1)", ": Error: no API key; see "),
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


@pytest.mark.parametrize(("tail", "line"), [
    ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom\n", "ValueError: boom"),
    ("Error: config invalid\n{\n  \"a\": 1\n}\n", "Error: config invalid"),
    ("listening\nnpm ERR! missing script: start\n]\n", "npm ERR! missing script: start"),
    ("starting up\n}\n", "starting up"),
    ("Error: from the run before\n--- 2026-12-05 10:00:00 starting srv\n}\n", None),
    ("--- 2026-12-05 10:00:00 starting srv\n", None),
    ("", None),
])
def test_the_telling_line_is_this_runs_last_error_else_its_last_worded_line(tail: str, line: str | None) -> None:
    assert telling_line(tail) == line
