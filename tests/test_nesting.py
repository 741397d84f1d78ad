"""Recognising a command line that runs toolbridge, whatever shape it takes, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config import runs_toolbridge
from proxy.config._nesting import served_config_dir

TOOLBRIDGE = [
    ("toolbridge", []),
    ("toolbridge", ["serve", "--config-dir", "/etc/tb", "--profile", "x"]),
    ("/home/me/project/.venv/bin/toolbridge", ["serve"]),
    ("toolbridge.exe", []),
    ("python3", ["-m", "proxy", "serve"]),
    ("/usr/bin/python3.11", ["-mproxy"]),
    ("uvx", ["--from", "/tmp/toolbridge-0.1.0-py3-none-any.whl", "toolbridge", "serve"]),
    ("uvx", ["toolbridge==0.1.0", "serve"]),
    ("pipx", ["run", "--spec", "toolbridge[semantic]", "toolbridge"]),
    ("uv", ["run", "--directory", "/src/toolbridge", "python", "-m", "proxy", "serve"]),
    ("env", ["TZ=UTC", "/opt/venv/bin/toolbridge", "serve"]),
    ("bash", ["-c", "cd /srv && exec toolbridge serve"]),
]
OTHERS = [
    ("uvx", ["mcp-server-filesystem", "/home/me/toolbridge"]),
    ("mcp-server-git", ["--repository", "/src/toolbridge"]),
    ("python", ["server.py", "-m", "other"]),
    ("npx", ["-y", "@modelcontextprotocol/server-memory"]),
    ("bash", ["-c", "echo toolbridge"]),
]


@pytest.mark.parametrize(("command", "args"), TOOLBRIDGE)
def test_every_shape_of_toolbridge_is_recognised(command: str, args: list[str]) -> None:
    assert runs_toolbridge(command, args)


@pytest.mark.parametrize(("command", "args"), OTHERS)
def test_servers_that_merely_mention_toolbridge_are_not(command: str, args: list[str]) -> None:
    assert not runs_toolbridge(command, args)


def test_the_config_dir_served_is_the_argument_else_the_home_else_the_working_directory(tmp_path: Path) -> None:
    assert served_config_dir("toolbridge", ["serve", "--config-dir", "sub"], {}, tmp_path) == tmp_path / "sub"
    assert served_config_dir("toolbridge", ["serve", f"--config-dir={tmp_path}"], {}, Path("/")) == tmp_path
    assert served_config_dir("toolbridge", ["serve"], {"TOOLBRIDGE_HOME": str(tmp_path)}, Path("/")) == tmp_path
    assert served_config_dir("toolbridge", ["serve"], {}, tmp_path) == tmp_path
    assert served_config_dir("mcp-server-time", [], {}, tmp_path) is None
