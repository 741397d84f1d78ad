"""Shared fixtures: the anyio backend, a free TCP port, and uvicorn apps run inside a task; the root
logger put back after each test; and, under pytest-xdist, a turn of its own for each test marked `alone`."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from servers.cluster import INSTALL_HINT, installed, redis_server

from proxy.ops import SafeFormatter


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers a core. Most of an end-to-end test's time is spent waiting on processes (a
    `toolbridge serve` or an upstream starting, answering, exiting), so one worker a core left the cores
    half idle (0.8 of 2 busy over a whole run; 1.3 with two a core, and the run 38% shorter)."""
    return 2 * (os.cpu_count() or 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `alone` go first: a worker's first tests are short, so the pool they stop (while every
    other worker finishes the test it is running) stands idle for less than it would mid-run."""
    items.sort(key=lambda item: item.get_closest_marker("alone") is None)  # stable: the rest keep their order


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    with _turn(item):
        return (yield)


@contextmanager
def _turn(item: pytest.Item) -> Iterator[None]:
    """Tests share the machine's cores across xdist workers; one marked `alone` (it bounds a latency)
    runs, set-up to teardown, while no other test does.

    A turnstile of two file locks: every test passes the gate and takes the room shared; an `alone`
    test holds the gate while it waits for the room to empty, so no new test slips in meanwhile.
    """
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:  # one process: every test is alone already
        yield
        return
    alone = item.get_closest_marker("alone") is not None
    directory = Path(tempfile.gettempdir()) / f"toolbridge-tests-{workerinput['testrunuid']}"
    directory.mkdir(exist_ok=True)
    with (directory / "gate").open("a") as gate, (directory / "room").open("a") as room:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield  # closing the files releases the locks


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A directory every xdist worker of this run shares (for what is computed once a run, under `exclusive`)."""
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent  # a worker's base is <run>/popen-gwN
    directory = shared / "shared"
    directory.mkdir(exist_ok=True)
    return directory


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Hold an exclusive file lock on `lock` (created if missing) for the body, across processes."""
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


@pytest.fixture(autouse=True)
def _environment_put_back() -> Iterator[None]:
    """`cli.main` run in a test sets `os.environ` as for a process of its own (`TOOLBRIDGE_SERVING`, the chain of
    served config dirs): left there, every later subprocess of the worker would inherit it, and a
    `toolbridge serve` test would see a chain it is not in (which test ran before it depends on the workers)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _root_logging_put_back() -> Iterator[None]:
    """`cli.main` run in a test sets up logging as for a process of its own; its stderr handler would
    outlive the test's captured stderr, and every later record would print a "Logging error"."""
    root = logging.getLogger()
    level = root.level
    yield
    for handler in [h for h in root.handlers if isinstance(h.formatter, SafeFormatter)]:
        root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio only; module-wide, so a module's async fixtures (a red-team gateway) can be module-scoped too."""
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
