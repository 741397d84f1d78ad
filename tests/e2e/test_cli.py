"""The one-shot CLI commands against a real fleet of subprocess upstreams."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fleetdir import REPO, write_config, write_fleet


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
    found = toolbridge("search", "disk", "operation", "17", "--config-dir", config)  # words, as a shell splits them
    assert found.returncode == 0, found.stderr
    assert [result["matches"][0] for result in json.loads(found.stdout)["results"]] == ["disk__disk_0017"]
    status = toolbridge("status", "--config-dir", config)
    assert status.returncode == 0, status.stderr
    upstreams = status.stdout.split("\n\n")[0].splitlines()
    assert upstreams[0].split()[:5] == ["server", "state", "transport", "protocol", "tools"]
    rows = {line.split()[0]: [line.split()[1], line.split()[4]] for line in upstreams[1:]}
    assert rows == {"disk": ["ready", "30"], "mail": ["ready", "3"]}


def test_unknown_profile_is_refused(tmp_path: Path) -> None:
    done = toolbridge("catalog", "--profile", "nope", "--config-dir", str(fleet(tmp_path)))
    assert done.returncode != 0 and "unknown profile 'nope'" in done.stderr


def run_in(directory: Path, *args: str, home: str | None = None) -> subprocess.CompletedProcess[str]:
    """`toolbridge` started in `directory`, with `TOOLBRIDGE_HOME` set when given."""
    env = {key: value for key, value in os.environ.items() if key != "TOOLBRIDGE_HOME"}
    env |= {"PYTHONPATH": str(REPO)} | ({"TOOLBRIDGE_HOME": home} if home else {})
    return subprocess.run([sys.executable, "-m", "proxy", *args], capture_output=True, text=True, cwd=directory,
                          env=env, timeout=120)


@pytest.mark.parametrize("how", ["--config-dir", "TOOLBRIDGE_HOME"])
def test_a_relative_config_dir_is_the_same_dir_for_every_command(tmp_path: Path, how: str) -> None:
    write_fleet(tmp_path / "conf", {"mail": ["--tools", "3", "--prefix", "mail"]})
    given = ("--config-dir", "conf") if how == "--config-dir" else ()
    status = run_in(tmp_path, "status", *given, home=None if given else "conf")
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[1].split()[:2] == ["mail", "ready"], status.stdout
    found = run_in(tmp_path, "search", "mail operation 2", *given, home=None if given else "conf")
    assert json.loads(found.stdout)["results"][0]["matches"][0] == "mail__mail_0002", found.stderr


def test_check_reports_a_command_that_is_not_installed_and_catalog_fails_on_it(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"ghost": {"args": ["--stdio"], "command": "mcp-server-doesnotexist"}})
    checked = toolbridge("check", "--config-dir", str(config))
    assert checked.returncode == 1
    assert f"error: {config / 'upstreams' / 'ghost.yaml'}:3: command: 'mcp-server-doesnotexist' is not on PATH" \
        in checked.stderr
    assert checked.stdout.strip() == "1 upstream(s) valid, 1 problem(s)"
    catalog = toolbridge("catalog", "--config-dir", str(config))
    assert catalog.returncode == 1
    assert "error: server ghost is parked: upstream 'ghost': command not found" in catalog.stderr


def test_a_misspelt_core_tool_of_a_known_server_is_reported_with_a_suggestion(tmp_path: Path) -> None:
    config = fleet(tmp_path)
    assert toolbridge("catalog", "--config-dir", str(config)).returncode == 0  # the catalogs are now cached
    (config / "toolsets.yaml").write_text("core:\n  - mail__mali_0001\n  - disk__*\n  - mail__nothing_like_it\n")
    checked = toolbridge("check", "--config-dir", str(config))
    assert checked.returncode == 1
    toolsets = config / "toolsets.yaml"
    assert checked.stderr.splitlines() == [
        f"error: {toolsets}:2: core.0: 'mail__mali_0001' names no tool of server mail (3 tools); "
        "did you mean 'mail__mail_0001'?",
        f"error: {toolsets}:4: core.2: 'mail__nothing_like_it' names no tool of server mail (3 tools)",
    ]
    catalog = toolbridge("catalog", "--config-dir", str(config))
    assert catalog.returncode == 1 and "did you mean 'mail__mail_0001'?" in catalog.stderr
