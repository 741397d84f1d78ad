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
    imported = convert_client_config(CLAUDE)
    upstreams, problems = imported.upstreams, imported.problems
    assert upstreams == {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "remote_api": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "legacy": {"url": "https://old.example.com/sse", "transport": "sse"},
        "off": {"command": "x", "enabled": False},
    }
    assert problems == ["broken: neither 'command' nor 'url'; skipped"]


def test_vscode_servers_map_converts() -> None:
    imported = convert_client_config(VSCODE)
    upstreams, problems = imported.upstreams, imported.problems
    assert upstreams == {"git": {"command": "mcp-server-git"}, "web": {"url": "http://localhost:9000/mcp"}}
    assert problems == []


@pytest.mark.parametrize("document", [[], {"other": {}}, {"mcpServers": []}])
def test_documents_without_servers_are_reported(document: object) -> None:
    assert convert_client_config(document).upstreams == {}
    assert len(convert_client_config(document).problems) == 1


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


def test_claude_code_defaults_carry_over_and_load(tmp_path: Path) -> None:
    imported = convert_client_config({"mcpServers": {"api": {
        "url": "${API_BASE:-https://api.example.com}/mcp", "headers": {"Authorization": "Bearer ${API_KEY:-none}"}}}})
    assert imported.upstreams["api"] == {"url": "${API_BASE:-https://api.example.com}/mcp",
                                         "headers": {"Authorization": "Bearer ${API_KEY:-none}"}}
    assert imported.warnings == [] and imported.problems == []
    (tmp_path / "upstreams").mkdir()
    (tmp_path / "upstreams" / "api.yaml").write_text(json.dumps(imported.upstreams["api"]))
    loaded = load_config(tmp_path, environ={"API_KEY": "k"}).upstreams["api"]
    assert (str(loaded.url), loaded.headers) == ("https://api.example.com/mcp", {"Authorization": "Bearer k"})


def test_vscode_variables_are_converted_or_warned_about(tmp_path: Path) -> None:
    source = tmp_path / "proj" / ".vscode" / "mcp.json"
    imported = convert_client_config({"servers": {"fs": {
        "command": "node", "args": ["${workspaceFolder}/server.js", "${config:editor.tabSize}"],
        "env": {"TOKEN": "${input:github-token}", "HOME_DIR": "${userHome}", "X": "${env:X}"}}}}, source)
    workspace = str((tmp_path / "proj").resolve())
    assert imported.upstreams["fs"] == {
        "command": "node", "args": [f"{workspace}/server.js", "${config:editor.tabSize}"],
        "env": {"TOKEN": "${GITHUB_TOKEN}", "HOME_DIR": str(Path.home()), "X": "${env:X}"}}
    assert imported.warnings == [
        f"fs: ${{workspaceFolder}} written as {workspace}",
        "fs: ${config:editor.tabSize} has no equivalent; copied literally, edit the file",
        "fs: ${input:github-token} (a VS Code prompt) has no equivalent; set the environment variable GITHUB_TOKEN",
    ]


def test_env_file_is_read_into_env_and_an_unreadable_one_is_warned_about(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("# keys\nexport A=1\nB='two words'\nC=\"x\"\n")
    imported = convert_client_config({"servers": {
        "ok": {"command": "x", "envFile": "${workspaceFolder}/.env", "env": {"C": "mine"}},
        "gone": {"command": "x", "envFile": "missing.env"}}}, tmp_path / "mcp.json")
    assert imported.upstreams["ok"]["env"] == {"A": "1", "B": "two words", "C": "mine"}
    assert "env" not in imported.upstreams["gone"]
    assert any(w.startswith("gone: envFile ") and "could not be read" in w for w in imported.warnings)


def test_vscode_settings_json_form_converts() -> None:
    imported = convert_client_config({"editor.fontSize": 12, "mcp": {"servers": VSCODE["servers"]}})
    assert imported.upstreams == {"git": {"command": "mcp-server-git"}, "web": {"url": "http://localhost:9000/mcp"}}


def test_files_with_literal_secrets_are_written_0600(tmp_path: Path) -> None:
    source = tmp_path / "mcp.json"
    source.write_text(json.dumps({"mcpServers": {
        "literal": {"url": "https://x.example/mcp", "headers": {"Authorization": "Bearer sk-live-123"}},
        "referenced": {"url": "https://y.example/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "plain": {"command": "x", "env": {"API_KEY": "${env:API_KEY}"}},
        "envlit": {"command": "x", "env": {"API_KEY": "abc123"}}}}))
    done = subprocess.run([sys.executable, "-m", "proxy", "import", str(source), "--config-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    modes = {path.stem: path.stat().st_mode & 0o777 for path in (tmp_path / "upstreams").iterdir()}
    assert modes == {"literal": 0o600, "envlit": 0o600, "referenced": 0o644, "plain": 0o644}


def test_a_cursor_url_ending_in_sse_stays_sse_with_a_warning() -> None:
    imported = convert_client_config({"mcpServers": {"old": {"url": "https://old.example.com/sse"},
                                                     "new": {"url": "https://new.example.com/mcp"}}})
    assert imported.upstreams == {"old": {"url": "https://old.example.com/sse", "transport": "sse"},
                                  "new": {"url": "https://new.example.com/mcp"}}
    assert imported.warnings == ["old: no 'type' and the URL ends in /sse: written as transport: sse"]


def test_a_renamed_server_is_warned_about() -> None:
    servers = {"My Server.v2": {"command": "x"}, "plain-name_1": {"command": "y"}}
    imported = convert_client_config({"mcpServers": servers})
    assert sorted(imported.upstreams) == ["My_Server_v2", "plain-name_1"]
    assert imported.warnings == ["My Server.v2: renamed 'My_Server_v2' (a server name is [A-Za-z0-9_-], at most 64)"]


def test_import_skips_every_entry_that_runs_toolbridge_itself_and_says_so(tmp_path: Path) -> None:
    """The README's own flow: a client connected to toolbridge, then its config imported into toolbridge."""
    (tmp_path / "toolsets.yaml").write_text("core: []\n")
    wheel = "/downloads/toolbridge-0.1.0-py3-none-any.whl"
    documents = {
        "claude_desktop_config.json": {"mcpServers": {
            "toolbridge": {"command": "/home/me/.venv/bin/toolbridge", "args": ["serve", "--config-dir", "/c"]},
            "time": {"command": "uvx", "args": ["mcp-server-time"]}}},
        ".claude.json": {"mcpServers": {"tb": {"command": sys.executable, "args": ["-m", "proxy", "serve"]}}},
        "mcp.json": {"mcpServers": {"bridge": {"command": "uvx", "args": ["--from", wheel, "toolbridge", "serve"]}}},
        "vscode-mcp.json": {"servers": {"gw": {"type": "stdio", "command": "pipx", "args": ["run", "toolbridge"]},
                                        "fs": {"command": "npx", "args": ["-y", "server-filesystem", "/toolbridge"]}}},
    }
    skipped = []
    for name, document in documents.items():
        source = tmp_path / name
        source.write_text(json.dumps(document))
        done = subprocess.run([sys.executable, "-m", "proxy", "import", str(source), "--config-dir", str(tmp_path)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        skipped += [line.split(":")[1].strip() for line in done.stderr.splitlines() if "runs toolbridge itself" in line]
    assert skipped == ["toolbridge", "tb", "bridge", "gw"]
    assert sorted(path.name for path in (tmp_path / "upstreams").iterdir()) == ["fs.yaml", "time.yaml"]


def test_a_vscode_mcp_json_with_comments_and_trailing_commas_imports(tmp_path: Path) -> None:
    (tmp_path / "toolsets.yaml").write_text("core: []\n")
    source = tmp_path / ".vscode" / "mcp.json"
    source.parent.mkdir()
    source.write_text("""{
  // servers for this workspace
  "servers": {
    "web": {"type": "http", "url": "https://mcp.example.com//mcp", /* a URL's // is no comment */},
    "git": {
      "type": "stdio",
      "command": "mcp-server-git", // the local one
      "args": ["--note", "a /* b */ c",],
    },
  },
}
""")
    done = subprocess.run([sys.executable, "-m", "proxy", "import", str(source), "--config-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    config = load_config(tmp_path)
    assert (config.upstreams["web"].url, config.upstreams["git"].args) == ("https://mcp.example.com//mcp",
                                                                          ("--note", "a /* b */ c"))
