"""The one-shot CLI commands against a real fleet of subprocess upstreams."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fleetdir import REPO, write_fleet


def toolbridge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def fleet(tmp_path: Path) -> Path:
    return write_fleet(tmp_path, {"mail": ["--tools", "3", "--prefix", "mail"],
                                  "disk": ["--tools", "30", "--prefix", "disk"]},
                       {"core": ["mail__mail_0000"]})


def test_catalog_prints_what_a_client_gets_with_its_figures(tmp_path: Path) -> None:
    done = toolbridge("catalog", "--json", "--context-tokens", "10000", "--config-dir", str(fleet(tmp_path)))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [t["name"] for t in report["tools"]] == ["mail__mail_0000", "tool_search", "tool_describe", "tool_call"]
    assert (report["tier"], report["budget"], report["deferred_tools"], report["core_tools"]) == ("bridge", 500, 32, 1)
    assert report["form"] in ("names", "mixed")
    assert report["tokens"] < report["raw_schema_tokens"] and report["reduction_pct"] > 0


def test_search_and_status(tmp_path: Path) -> None:
    config = str(fleet(tmp_path))
    found = toolbridge("search", "disk operation 17", "--config-dir", config)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["matches"][0] == "disk__disk_0017"
    status = toolbridge("status", "--config-dir", config)
    assert status.returncode == 0, status.stderr
    upstreams = status.stdout.split("\n\n")[0].splitlines()
    assert upstreams[0].split()[:5] == ["server", "state", "transport", "protocol", "tools"]
    rows = {line.split()[0]: [line.split()[1], line.split()[4]] for line in upstreams[1:]}
    assert rows == {"disk": ["ready", "30"], "mail": ["ready", "3"]}


def test_unknown_profile_is_refused(tmp_path: Path) -> None:
    done = toolbridge("catalog", "--profile", "nope", "--config-dir", str(fleet(tmp_path)))
    assert done.returncode != 0 and "unknown profile 'nope'" in done.stderr
