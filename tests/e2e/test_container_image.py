"""The container image, built from the Dockerfile and run by a real engine: every bundled server (upstreams/)
is ready in it, its Node.js is the one the README asks for, and it stays under 600 MB.

Needs an engine that can run a container (podman or docker); skipped with the engine's own words where none
can. Where Docker Hub is out of reach, the Dockerfile's base is built from Debian's mirror instead
(scripts/container-base.sh: root and debootstrap). A cold build takes about 7 minutes on 2 shared cores
(a rebuild after a change to proxy/ about 2), so it runs only when asked: `TOOLBRIDGE_CONTAINER_TESTS=1`.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from conftest import exclusive, free_port

REPO = Path(__file__).resolve().parent.parent.parent
IMAGE = "localhost/toolbridge:test"
DEFAULT_BASE = re.search(r"^ARG BASE=(\S+)$", (REPO / "Dockerfile").read_text(), re.MULTILINE).group(1)  # type: ignore[union-attr]
BUNDLED = sorted(path.stem for path in (REPO / "upstreams").glob("*.yaml"))
SIZE_LIMIT = 600 * 1000 * 1000  # bytes, as the engines count an image's size

if os.environ.get("TOOLBRIDGE_CONTAINER_TESTS") != "1":
    pytest.skip("building the image takes ~7 minutes: set TOOLBRIDGE_CONTAINER_TESTS=1 to run it",
                allow_module_level=True)
# An engine's default limits for a container (nofile 1048576) can exceed the caller's own; raising a limit
# needs CAP_SYS_RESOURCE, which a VM's sandbox may withhold. These fit under the usual limits and are ample.
LIMITS = ["--ulimit", "nofile=16384:16384", "--ulimit", "nproc=16384:16384"]


@dataclass(frozen=True)
class Engine:
    """How to run the engine here: its command (with a runtime that works on this host) and `run` options."""

    command: list[str]
    run_options: list[str]

    @property
    def podman(self) -> bool:
        return Path(self.command[0]).name == "podman"

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.command, *args], capture_output=True, text=True, timeout=timeout, check=False)


def candidates(program: str) -> list[Engine]:
    """The ways to run `program`, in order. podman's default runtime crun refuses hosts whose cgroup v2
    hierarchy has controllers beside v1 ("cgroups in hybrid mode not supported"); runc runs there."""
    found = [Engine([program], []), Engine([program], LIMITS)]
    if program == "podman" and shutil.which("runc"):
        found.append(Engine([program, "--runtime", "runc"], LIMITS))
    return found


def base_image(engine: Engine) -> tuple[str | None, str]:
    """The Dockerfile's base: the default one if the engine has it or can pull it, else a stand-in from
    Debian's mirror; None and why where neither is possible."""
    if engine("image", "inspect", DEFAULT_BASE).returncode == 0:
        return DEFAULT_BASE, ""
    pulled = engine("pull", DEFAULT_BASE, timeout=600)
    if pulled.returncode == 0:
        return DEFAULT_BASE, ""
    why = f"cannot pull {DEFAULT_BASE}: {last_line(pulled.stderr)}"
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        return None, f"{why}; and no stand-in: scripts/container-base.sh needs root and debootstrap"
    made = subprocess.run(
        [str(REPO / "scripts" / "container-base.sh"), engine.command[0]],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if made.returncode != 0:
        return None, f"{why}; and scripts/container-base.sh failed: {last_line(made.stderr)}"
    return made.stdout.strip(), ""


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def engine_and_base() -> tuple[Engine | None, str | None, str]:
    """The first engine that runs a container from the base here, with that base; or why there is none."""
    programs = [program for program in ("podman", "docker") if shutil.which(program)]
    if not programs:
        return None, None, "no container engine (podman or docker) on PATH"
    reasons = []
    for program in programs:
        base, why = base_image(Engine([program], []))
        if base is None:
            reasons.append(why)
            continue
        for engine in candidates(program):
            ran = engine("run", "--rm", *engine.run_options, base, "true")
            if ran.returncode == 0:
                return engine, base, ""
            why = f"{program} cannot run a container here: {last_line(ran.stderr)}"
        reasons.append(why)
    return None, None, "; ".join(reasons)


@dataclass(frozen=True)
class Built:
    engine: Engine
    image: str


@pytest.fixture(scope="module")
def built(run_dir: Path) -> Built:
    """The image, built once a run (xdist workers wait for the first; later builds reuse its layers)."""
    with exclusive(run_dir / "container-image.lock"):
        engine, base, why = engine_and_base()
        if engine is None or base is None:
            pytest.skip(why)
        build = ["build", "--build-arg", f"BASE={base}", "-t", IMAGE]
        if engine.podman:  # docker's image format (podman's default OCI one drops HEALTHCHECK); RUN needs no runtime
            build += ["--format", "docker", "--isolation", "chroot"]
        ca = os.environ.get("SSL_CERT_FILE")
        if ca and Path(ca).is_file():  # the CAs this host trusts (a TLS-inspecting proxy's), for the build's downloads
            build += ["--secret", f"id=ca,src={ca}"]
        done = engine(*build, str(REPO), timeout=1800)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return Built(engine, IMAGE)


@pytest.fixture
def container(built: Built) -> Iterator[tuple[str, str]]:
    """The image serving on a loopback port, as the Dockerfile's header runs it; yields (base URL, token)."""
    port, token = free_port(), secrets.token_hex(16)
    started = built.engine(
        "run",
        "-d",
        *built.engine.run_options,
        "-p",
        f"127.0.0.1:{port}:8765",
        "-e",
        f"TOOLBRIDGE_AUTH_TOKEN={token}",
        built.image,
    )
    assert started.returncode == 0, started.stderr
    name = started.stdout.strip()
    try:
        yield f"http://127.0.0.1:{port}", token
    finally:
        built.engine("rm", "-f", name)


def test_every_bundled_server_is_ready_in_it(container: tuple[str, str]) -> None:
    url, token = container
    deadline, states = time.monotonic() + 120, {}
    while time.monotonic() < deadline:
        try:
            status = httpx2.get(f"{url}/status", headers={"Authorization": f"Bearer {token}"}, timeout=5)
        except httpx2.TransportError:
            status = None
        if status is not None and status.status_code == 200:
            upstreams = status.json()["upstreams"]
            states = {u["server"]: (u["state"], u["last_error"]) for u in upstreams}
            if sorted(states) == BUNDLED and all(state == "ready" for state, _ in states.values()):
                break
        time.sleep(1)
    assert {server: state for server, (state, _) in states.items()} == dict.fromkeys(BUNDLED, "ready"), states
    assert httpx2.get(f"{url}/healthz", timeout=5).status_code == 200


def test_its_node_is_the_one_the_readme_asks_for(built: Built) -> None:
    done = built.engine("run", "--rm", *built.engine.run_options, "--entrypoint", "node", built.image, "--version")
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip().lstrip("v").split(".")[0]) >= 20, done.stdout


def test_it_stays_under_600_mb(built: Built) -> None:
    size = int(built.engine("image", "inspect", "--format", "{{.Size}}", built.image).stdout.strip())
    assert size < SIZE_LIMIT, f"{size / 1e6:.0f} MB"
