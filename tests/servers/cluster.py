"""Real Redis, nginx and toolbridge replica processes on loopback ports, for the replica tests and
`bench/replicas.py` (which imports it from here).

Redis and nginx come from Debian packages (`apt-get install nginx redis-server`; `.ci/run` does it);
nginx runs `deploy/nginx.conf` with the replicas' addresses put in.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
from redis.asyncio import Redis
from redis.exceptions import RedisError

REPO = Path(__file__).resolve().parent.parent.parent
NGINX_TEMPLATE = REPO / "deploy" / "nginx.conf"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


INSTALL_HINT = "apt-get install -y nginx redis-server (as .ci/run does)"


def installed(name: str) -> str | None:
    """A system program on PATH, or in /usr/sbin where Debian puts nginx (not on a user's PATH)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")


def binary(name: str) -> str:
    found = installed(name)
    assert found, f"{name} is not installed: {INSTALL_HINT}"
    return found


async def stop(process: anyio.abc.Process) -> None:
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.terminate()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


@asynccontextmanager
async def redis_server(directory: Path) -> AsyncIterator[str]:
    """`redis-server` on a free loopback port, no persistence; yields its URL once it answers PING."""
    port = free_port()
    directory.mkdir(parents=True, exist_ok=True)
    command = [binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
               "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"]
    process = await anyio.open_process(command, stdout=subprocess.DEVNULL, stderr=None)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = Redis.from_url(url)
        with anyio.fail_after(20):
            while True:
                try:
                    await client.ping()
                    break
                except RedisError:
                    await anyio.sleep(0.05)
        await client.aclose()
        yield url
    finally:
        await stop(process)


def nginx_config(listen: int, replicas: Sequence[tuple[str, int]]) -> str:
    """`deploy/nginx.conf` pointed at loopback replicas: the `toolbridge-N` servers become `127.0.0.1:port`."""
    text = NGINX_TEMPLATE.read_text()
    text = text.replace("listen 8080;", f"listen 127.0.0.1:{listen};")
    text = text.replace("error_log stderr warn;", "error_log logs/error.log warn;")
    text = text.replace("access_log /dev/stdout;", "access_log logs/access.log;")
    for replica_id, port in replicas:
        text = text.replace(f"{replica_id}:8765", f"127.0.0.1:{port}")
    return text


@asynccontextmanager
async def nginx(directory: Path, replicas: Sequence[tuple[str, int]]) -> AsyncIterator[str]:
    """nginx in the foreground with `deploy/nginx.conf` in a temp prefix; yields its base URL once it answers."""
    port = free_port()
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    config = directory / "nginx.conf"
    config.write_text(nginx_config(port, replicas))
    # As root, nginx's workers would run as nobody, who cannot enter a private temp dir.
    user = "user root;" if os.geteuid() == 0 else ""
    command = [binary("nginx"), "-p", str(directory), "-c", str(config), "-e", str(directory / "logs" / "error.log"),
               "-g", f"daemon off; pid {directory / 'nginx.pid'}; {user}"]
    process = await anyio.open_process(command, stdout=subprocess.DEVNULL, stderr=None)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx2.AsyncClient() as http:
            with anyio.fail_after(20):
                while True:
                    try:
                        await http.get(f"{base}/nginx-alive")
                        break
                    except httpx2.TransportError:
                        assert process.returncode is None, (directory / "logs" / "error.log").read_text()
                        await anyio.sleep(0.05)
        yield base
    finally:
        await stop(process)


@asynccontextmanager
async def replica(config_dir: Path, port: int, replica_id: str, *extra: str) -> AsyncIterator[anyio.abc.Process]:
    """`toolbridge serve --transport http --replica-id ...` in its own process group; yields the process
    once `/healthz` says ready (the fleet settled). The group goes at the end, upstream children too."""
    command = [sys.executable, "-m", "proxy", "serve", "--transport", "http", "--port", str(port),
               "--config-dir", str(config_dir), "--replica-id", replica_id, "--no-watch", *extra]
    environment = {**os.environ, "TOOLBRIDGE_LOG_LEVEL": "warning"}
    process = await anyio.open_process(command, env=environment, cwd=REPO, stdout=subprocess.DEVNULL, stderr=None,
                                       start_new_session=True)
    try:
        async with httpx2.AsyncClient() as http:
            with anyio.fail_after(30):
                while True:
                    try:
                        if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                            break
                    except httpx2.TransportError:
                        pass
                    assert process.returncode is None, f"replica {replica_id} exited with {process.returncode}"
                    await anyio.sleep(0.05)
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await stop(process)
