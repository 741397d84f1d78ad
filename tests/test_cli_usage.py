"""The `toolbridge` command's manners: a missing config dir, honest `--help`, pipes closed early."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("command", [["check"], ["serve"], ["serve", "--transport", "http"], ["catalog"]])
def test_a_missing_config_dir_is_an_error_and_is_not_created(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "typo"
    with pytest.raises(SystemExit) as exited:
        main([*command, "--config-dir", str(missing)])
    assert f"the config dir {missing} does not exist" in str(exited.value.code)
    assert "toolbridge init" in str(exited.value.code)
    assert not missing.exists()


def help_of(command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([command, "--help"])
    return out.getvalue()


@pytest.mark.parametrize("command", ["check", "import", "login", "init", "approve"])
def test_commands_without_a_session_do_not_offer_session_options(command: str) -> None:
    text = help_of(command)
    assert "--profile" not in text and "--context-tokens" not in text
    assert "--config-dir" in text


def undocumented(text: str) -> list[str]:
    """Options in a `--help` with no help text (argparse puts it beside them, or indented below)."""
    lines = text.splitlines()
    found = []
    for here, line in enumerate(lines):
        if re.match(r"^  -", line) and not re.search(r"\S {2,}\S", line.strip()):
            below = lines[here + 1] if here + 1 < len(lines) else ""
            if not re.match(r"^ {20,}\S", below):
                found.append(line.strip())
    return found


@pytest.mark.parametrize("command", ["serve", "catalog", "search", "status", "check", "init", "import", "login",
                                     "approve"])
def test_every_option_has_help_text(command: str) -> None:
    text = help_of(command)
    assert "the directory holding toolsets.yaml and upstreams/" in text
    assert "stderr log level" in text
    assert undocumented(text) == []


def test_output_piped_into_a_reader_that_leaves_early_is_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "upstreams").mkdir()
    process = subprocess.Popen([sys.executable, "-m", "proxy", "check", "--config-dir", str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # `| head -0`: nobody reads
    with process.stderr:
        stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, stderr
    assert "BrokenPipeError" not in stderr and "Traceback" not in stderr


def toolbridge_in(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "TOOLBRIDGE_HOME"} | {"PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "proxy", *args], capture_output=True, text=True, cwd=directory,
                          env=env, timeout=60)


@pytest.mark.parametrize("where", ["empty", "upstreams"])
def test_a_directory_without_toolsets_or_upstreams_is_not_a_config_dir(tmp_path: Path, where: str) -> None:
    (tmp_path / "toolsets.yaml").write_text("core: []\n")
    (tmp_path / "upstreams").mkdir()
    (tmp_path / "empty").mkdir()
    done = toolbridge_in(tmp_path, "check", "--config-dir", where)
    assert done.returncode == 1 and done.stdout == ""
    assert f"{tmp_path / where} is not a config dir: it has neither toolsets.yaml nor upstreams/" in done.stderr
    assert f"`toolbridge init {tmp_path / where}`" in done.stderr


def test_import_writes_into_the_working_directory_only_when_it_is_a_config_dir(tmp_path: Path) -> None:
    client = tmp_path / "claude_desktop_config.json"
    client.write_text(json.dumps({"mcpServers": {"git": {"command": "mcp-server-git"}}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    refused = toolbridge_in(elsewhere, "import", str(client))
    assert refused.returncode == 1 and list(elsewhere.iterdir()) == []
    assert "is not a config dir" in refused.stderr and "toolbridge init DIR --import" in refused.stderr
    (elsewhere / "toolsets.yaml").write_text("core: []\n")
    taken = toolbridge_in(elsewhere, "import", str(client))
    assert taken.returncode == 0, taken.stderr
    assert (elsewhere / "upstreams" / "git.yaml").read_text() == "command: mcp-server-git\n"


def test_check_counts_every_mistake_of_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "upstreams").mkdir()
    (tmp_path / "upstreams" / "a.yaml").write_text("{command: x, timeout: -1, connect_timeout: -1}\n")
    assert main(["check", "--config-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == "0 upstream(s) valid, 2 problem(s)\n" and len(err.splitlines()) == 1


def test_serve_on_a_terminal_says_it_waits_for_a_client_on_stderr_only(tmp_path: Path) -> None:
    (tmp_path / "upstreams").mkdir()
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--config-dir", str(tmp_path)], cwd=REPO,
                               stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(terminal)
    try:
        assert process.stderr is not None
        readable, _, _ = select.select([process.stderr], [], [], 30)
        assert readable and "waiting for an MCP client on stdin" in process.stderr.readline()
    finally:
        os.close(controller)  # the terminal hangs up: stdin ends, and serve with it
        out, _ = process.communicate(timeout=60)
    assert out == ""


def test_version_answers_without_loading_the_sdk() -> None:
    script = "import sys; from proxy.cli import main; main(['--version']); print('mcp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.stdout.splitlines() == ["toolbridge 0.1.0", "False"], done.stderr
