"""Shared fixtures: the anyio backend, a free TCP port, and uvicorn apps run inside a task."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn

from bench.cluster import INSTALL_HINT, installed, redis_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def missing_programs(*programs: str) -> str | None:
    """Why a test cannot run here: the system programs it starts that are not installed."""
    missing = [program for program in programs if installed(program) is None]
    return f"{', '.join(missing)} not installed: {INSTALL_HINT}" if missing else None


def needs(*programs: str) -> pytest.MarkDecorator:
    """Skip (with the reason and the fix) where a system program the test starts is not installed."""
    reason = missing_programs(*programs)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def serve_app(app: Any, port: int | None = None) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1 for the body's duration; yields `http://127.0.0.1:<port>`."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            server.force_exit = True


@pytest.fixture
async def redis_url(tmp_path: Path) -> AsyncIterator[str]:
    """A real redis-server for the test, on a free loopback port (skipped, naming the fix, where it is missing)."""
    if reason := missing_programs("redis-server"):
        pytest.skip(reason)
    async with redis_server(tmp_path / "redis") as url:
        yield url
