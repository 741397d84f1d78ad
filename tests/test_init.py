"""`toolbridge init`: an empty directory to a working config dir in one command, from the package alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from proxy.cli import main
from proxy.config import load_config

REPO = Path(__file__).resolve().parent.parent


def test_init_writes_a_config_dir_that_checks_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "fresh"
    assert main(["init", str(directory)]) == 0
    out = capsys.readouterr().out
    config = load_config(directory, environ={})
    assert (sorted(config.upstreams), config.problems) == (["time"], [])
    assert config.toolsets.core == ("time__get_current_time",)
    assert f'"--config-dir", "{directory}"' in out and "claude mcp add toolbridge" in out
    assert main(["check", "--config-dir", str(directory)]) == 0


def test_init_never_overwrites_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path)]) == 0
    (tmp_path / "toolsets.yaml").write_text("startup_wait: 1\n")
    assert main(["init", str(tmp_path)]) == 1
    assert "exists; skipped (use --force to overwrite)" in capsys.readouterr().err
    assert (tmp_path / "toolsets.yaml").read_text() == "startup_wait: 1\n"
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert "core:" in (tmp_path / "toolsets.yaml").read_text()


def test_init_can_take_the_servers_of_an_existing_client_config(tmp_path: Path) -> None:
    client = tmp_path / "claude_desktop_config.json"
    client.write_text(json.dumps({"mcpServers": {"git": {"command": "mcp-server-git", "args": ["--repository", "."]},
                                                 "remote": {"url": "https://mcp.example.com/mcp"}}}))
    directory = tmp_path / "config"
    assert main(["init", str(directory), "--import", str(client)]) == 0
    config = load_config(directory, environ={})
    assert (sorted(config.upstreams), config.problems) == (["git", "remote"], [])
    assert config.toolsets.core == ()


def test_init_writes_nothing_when_the_client_config_cannot_be_read(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path / "config"), "--import", str(tmp_path / "missing.json")]) == 1
    assert not (tmp_path / "config").exists()


def test_the_example_ships_in_the_wheel_and_init_works_from_it(tmp_path: Path) -> None:
    """Built from a copy of the sources (no build artefacts in the checkout), installed without the checkout."""
    source = tmp_path / "src"
    shutil.copytree(REPO / "proxy", source / "proxy", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, timeout=300, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("toolbridge-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert {"proxy/example/toolsets.yaml", "proxy/example/upstreams/time.yaml", "proxy/console/static/console.js",
            "proxy/console/static/console.css"} <= shipped
    subprocess.run([*pip, "install", "--no-deps", "--target", str(tmp_path / "site"), str(wheel)], check=True,
                   timeout=300)
    environment = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    directory = tmp_path / "config"
    done = subprocess.run([sys.executable, "-m", "proxy", "init", str(directory)], cwd="/", env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    where = subprocess.run([sys.executable, "-c", "import proxy; print(proxy.__file__)"], cwd="/", env=environment,
                           capture_output=True, text=True, timeout=60).stdout
    assert where.startswith(str(tmp_path / "site"))
    assert load_config(directory, environ={}).problems == []


def test_init_run_from_uvs_cache_prints_an_entry_that_outlives_the_cache(tmp_path: Path) -> None:
    """`uvx --from <wheel> toolbridge init`: the environment is uv's to delete, so the entry goes through uvx."""
    environment = tmp_path / ".cache" / "uv" / "archive-v0" / "f3a9"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True, timeout=120)
    (site,) = environment.glob("lib/python*/site-packages")
    ours = next(Path(p) for p in sys.path if p.endswith("site-packages") and (Path(p) / "mcp").is_dir())
    (site / "toolbridge-from-repo.pth").write_text(f"import site; site.addsitedir({str(ours)!r})\n{REPO}\n")
    record = site / "toolbridge-0.1.0.dist-info"  # as uv records a wheel it installed (PEP 610)
    record.mkdir()
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: toolbridge\nVersion: 0.1.0\n")
    wheel = "/downloads/toolbridge-0.1.0-py3-none-any.whl"
    (record / "direct_url.json").write_text(json.dumps({"url": f"file://{wheel}", "archive_info": {}}))
    directory = tmp_path / "config"
    done = subprocess.run([str(environment / "bin" / "python"), "-m", "proxy", "init", str(directory)], cwd="/",
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    entry = json.loads(next(line for line in done.stdout.splitlines() if '"mcpServers"' in line))
    assert entry["mcpServers"]["toolbridge"] == {
        "command": "uvx", "args": ["--from", wheel, "toolbridge", "serve", "--config-dir", str(directory)]}
    assert f"runs from uvx's cache ({environment})" in done.stdout and f"uv tool install {wheel}" in done.stdout
    assert str(environment) not in done.stdout.split("Next:")[1]
