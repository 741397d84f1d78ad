"""A new user's first hour: the bundled servers, launched the way a client launches toolbridge."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
import yaml
from conftest import free_port
from fleetdir import REPO, serve_http
from mcp import Client, StdioServerParameters, stdio_client

pytestmark = pytest.mark.anyio

BIN = str(Path(sys.executable).parent)


def serve_from(cwd: str, config_dir: Path) -> object:
    """`toolbridge serve --config-dir DIR` started in `cwd`, as a desktop client starts it (often from `/`)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "proxy", "serve", "--config-dir", str(config_dir)],
        env={"TOOLBRIDGE_LOG_LEVEL": "warning", "PYTHONPATH": str(REPO)}, cwd=cwd,
    )
    return stdio_client(params, errlog=sys.stderr)


def bundled_config(directory: Path, *servers: str) -> Path:
    """A config dir holding the repository's own upstream files, every tool listed directly."""
    (directory / "upstreams").mkdir(parents=True)
    for server in servers:
        shutil.copy(REPO / "upstreams" / f"{server}.yaml", directory / "upstreams")
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({"core": ["*"], "startup_wait": 30}))
    return directory


MISSING = [command for command in ("mcp-server-filesystem", "mcp-server-git", "git")
           if not (shutil.which(command, path=BIN) or shutil.which(command))]


@pytest.mark.skipif(bool(MISSING), reason=f"not installed: {MISSING} (run scripts/setup.sh)")
async def test_bundled_filesystem_and_git_serve_the_config_dir_whatever_the_launch_directory(tmp_path: Path) -> None:
    config_dir = bundled_config(tmp_path / "config", "filesystem", "git").resolve()
    (config_dir / "marker.txt").write_text("here\n")
    subprocess.run(["git", "init", "-q", str(config_dir)], check=True)
    async with Client(serve_from("/", config_dir), mode="legacy") as client:
        with anyio.fail_after(60):
            names = {t.name for t in (await client.list_tools()).tools}
        assert {"filesystem__list_allowed_directories", "git__git_status"} <= names, sorted(names)
        allowed = await client.call_tool("filesystem__list_allowed_directories", {})
        assert str(config_dir) in json.dumps(allowed.model_dump(mode="json"))
        assert '"/"' not in json.dumps(allowed.model_dump(mode="json"))
        status = await client.call_tool("git__git_status", {"repo_path": str(config_dir)})
        assert not status.is_error and "marker.txt" in json.dumps(status.model_dump(mode="json"))


@pytest.mark.skipif(shutil.which("mcp-server-time", path=BIN) is None and shutil.which("uvx") is None,
                    reason="neither mcp-server-time nor uvx is installed (scripts/setup.sh)")
async def test_a_config_dir_from_init_serves_its_example_tool(tmp_path: Path) -> None:
    directory = tmp_path / "fresh"
    init = subprocess.run([sys.executable, "-m", "proxy", "init", str(directory)], cwd="/", capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(REPO), "PATH": f"{BIN}:/usr/bin:/bin"})
    assert init.returncode == 0, init.stderr
    async with Client(serve_from("/", directory), mode="legacy") as client:
        with anyio.fail_after(60):
            while "time__get_current_time" not in {t.name for t in (await client.list_tools()).tools}:
                await anyio.sleep(0.2)
        now = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert not now.is_error and "UTC" in json.dumps(now.model_dump(mode="json"))


async def test_an_http_newcomer_is_told_the_profiles_and_the_missing_token(tmp_path: Path) -> None:
    directory = tmp_path / "config"
    (directory / "upstreams").mkdir(parents=True)
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({"profiles": {"default": {}, "cursor": {}}}))
    port = free_port()
    async with serve_http(directory, port, "--auth-token", "s3cret") as base, httpx2.AsyncClient() as http:
        missing = await http.get(f"{base}/mcp/cursr", headers={"Authorization": "Bearer s3cret"})
        assert missing.status_code == 404 and "/mcp/<profile> for: cursor, default" in missing.text
        status = await anyio.run_process([sys.executable, "-m", "proxy", "status", "--url", base], check=False,
                                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert status.returncode != 0
    assert "pass --auth-token or set TOOLBRIDGE_AUTH_TOKEN" in status.stderr.decode()
