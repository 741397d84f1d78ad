"""`toolbridge import`: client configs become upstream files that load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.config import convert_client_config, load_config

CLAUDE = {
    "mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "remote api": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "legacy": {"type": "sse", "url": "https://old.example.com/sse"},
        "off": {"command": "x", "disabled": True},
        "broken": {"args": []},
    }
}
VSCODE = {"servers": {"git": {"type": "stdio", "command": "mcp-server-git"},
                      "web": {"type": "http", "url": "http://localhost:9000/mcp"}}}


def test_claude_style_config_converts_every_kind_of_entry() -> None:
    upstreams, problems = convert_client_config(CLAUDE)
    assert upstreams == {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "remote_api": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "legacy": {"url": "https://old.example.com/sse", "transport": "sse"},
        "off": {"command": "x", "enabled": False},
    }
    assert problems == ["broken: neither 'command' nor 'url'; skipped"]


def test_vscode_servers_map_converts() -> None:
    upstreams, problems = convert_client_config(VSCODE)
    assert upstreams == {"git": {"command": "mcp-server-git"}, "web": {"url": "http://localhost:9000/mcp"}}
    assert problems == []


@pytest.mark.parametrize("document", [[], {"other": {}}, {"mcpServers": []}])
def test_documents_without_servers_are_reported(document: object) -> None:
    assert convert_client_config(document)[0] == {}
    assert len(convert_client_config(document)[1]) == 1


def test_import_command_writes_files_that_load_and_never_overwrites(tmp_path: Path) -> None:
    source = tmp_path / "mcp.json"
    source.write_text(json.dumps(VSCODE))
    command = [sys.executable, "-m", "proxy", "import", str(source), "--config-dir", str(tmp_path)]
    first = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    config = load_config(tmp_path)
    assert sorted(config.upstreams) == ["git", "web"] and config.problems == []
    again = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "exists; skipped" in again.stderr
