"""Config dirs for end-to-end runs, and `toolbridge serve` started the way clients start it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import yaml
from conftest import free_port
from mcp import Client, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client

CATALOG_SERVER = str(Path(__file__).parent.parent / "servers" / "catalog_server.py")
CONTROLLABLE = str(Path(__file__).parent.parent / "servers" / "controllable.py")
HOSTILE = str(Path(__file__).parent.parent / "servers" / "hostile.py")
REPO = Path(__file__).resolve().parent.parent.parent
MCPSERVER_FIXTURE = REPO / "tests" / "servers" / "mcpserver_fixture.py"


def write_config(directory: Path, upstreams: dict[str, dict[str, Any]], toolsets: dict[str, Any] | None = None,
                 ) -> Path:
    """A config dir with these upstream specs (a 30 s `connect_timeout` unless given) and `toolsets.yaml`."""
    (directory / "upstreams").mkdir(parents=True, exist_ok=True)
    for name, spec in upstreams.items():
        (directory / "upstreams" / f"{name}.yaml").write_text(yaml.safe_dump({"connect_timeout": 30, **spec}))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump(toolsets or {}))
    return directory


def write_fleet(directory: Path, servers: dict[str, list[str]], toolsets: dict[str, Any] | None = None) -> Path:
    """A config dir whose upstreams run the catalog server with the given arguments."""
    specs = {name: {"command": sys.executable, "args": [CATALOG_SERVER, *args], "connect_timeout": 20}
             for name, args in servers.items()}
    return write_config(directory, specs, toolsets)


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def serve_stdio(config_dir: Path, *extra: str) -> Any:
    """The stdio transport to `toolbridge serve`, as a client config would launch it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "proxy", "serve", "--config-dir", str(config_dir), *extra],
        env={"TOOLBRIDGE_LOG_LEVEL": "warning"},
        cwd=str(REPO),
    )
    return stdio_client(params, errlog=sys.stderr)


@asynccontextmanager
async def http_process(command: Sequence[str], probe: str, *, ready: Sequence[int] = (), timeout: float = 20,
                       env: dict[str, str] | None = None, stderr: Any = None) -> AsyncIterator[None]:
    """A subprocess serving HTTP, yielded once `probe` answers (with a status in `ready`, when given)."""
    process = await anyio.open_process(list(command), env=env, stdout=subprocess.DEVNULL, stderr=stderr, cwd=str(REPO))
    try:
        async with httpx2.AsyncClient() as http:
            with anyio.fail_after(timeout):
                while True:
                    try:
                        status = (await http.get(probe)).status_code
                        if not ready or status in ready:
                            break
                    except httpx2.TransportError:
                        pass
                    await anyio.sleep(0.05)
        yield
    finally:
        process.terminate()
        with anyio.move_on_after(10, shield=True):
            await process.wait()
        if process.returncode is None:
            process.kill()


@asynccontextmanager
async def serve_http(config_dir: Path, port: int, *extra: str, env: dict[str, str] | None = None,
                     stderr: Any = None, ready: Sequence[int] = (200, 503)) -> AsyncIterator[str]:
    """`toolbridge serve --transport http` as a subprocess; yields its base URL once it answers.

    By default listening is enough: 503 means the fleet is still settling, which some tests watch."""
    command = [sys.executable, "-m", "proxy", "serve", "--transport", "http", "--port", str(port),
               "--config-dir", str(config_dir), *extra]
    environment = {**os.environ, "TOOLBRIDGE_LOG_LEVEL": "warning", **(env or {})}
    base = f"http://127.0.0.1:{port}"
    async with http_process(command, f"{base}/healthz", ready=ready, env=environment, stderr=stderr, timeout=30):
        yield base


@asynccontextmanager
async def mcpserver_over_http(*flags: str) -> AsyncIterator[str]:
    """The SDK `MCPServer` fixture as its own process (its server object serves one HTTP app per process)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with http_process([sys.executable, str(MCPSERVER_FIXTURE), *flags, "--http", str(port)], url,
                            stderr=subprocess.DEVNULL):
        yield url


def wire(tools: Sequence[Any]) -> bytes:
    return json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]).encode()


@asynccontextmanager
async def connected(config: Path, transport: str, mode: str = "auto", on_message: Any = None
                    ) -> AsyncIterator[Client]:
    """The real SDK client on `toolbridge serve` over `transport` (stdio or http), once initialized."""
    if transport == "stdio":
        async with Client(serve_stdio(config), mode=mode, message_handler=on_message) as client:
            yield client
        return
    async with serve_http(config, free_port()) as base, \
            Client(streamable_http_client(f"{base}/mcp"), mode=mode, message_handler=on_message) as client:
        yield client


class ToolListChanges:
    """What a client session was told of its tool list: `changes` counts the list_changed notifications, and
    `changed` is set by the next one (in either era: a 2026-07-28 client hears them on its listen stream)."""

    def __init__(self) -> None:
        self.changes = 0
        self.changed = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.changes += 1
            self.changed.set()
            self.changed = anyio.Event()

    async def wait(self) -> None:
        """Until the next list_changed (bounded)."""
        with anyio.fail_after(15):
            await self.changed.wait()
