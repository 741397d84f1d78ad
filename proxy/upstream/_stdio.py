"""Stdio upstreams: the child process, its pipes as an MCP transport, and its whole process group.

We own the process (through anyio's public process API) instead of using the SDK's stdio client,
because we need what it does not expose: the child's pid. The child leads a new session, so on
exit its whole group goes — grandchildren included — and the end of its stdout is an event the
supervisor waits on, so a crash is seen at once rather than at the next ping.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

import anyio
from anyio.abc import Process
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamRefused
from proxy.upstream._salvage import salvage_tool_list

logger = logging.getLogger(__name__)

EXIT_GRACE = 2.0  # after stdin closes, then again after SIGTERM (the SDK's and the spec's order)
NOISE_LOG_INTERVAL = 10.0


def resolve_command(command: str) -> str | None:
    """Find `command` on PATH, then next to the running interpreter (the venv's bin/)."""
    return shutil.which(command) or shutil.which(command, path=str(Path(sys.executable).parent))


def _working_directory(config: UpstreamConfig, config_dir: Path) -> Path | None:
    if config.cwd is None:
        return None
    cwd = Path(config.cwd) if Path(config.cwd).is_absolute() else config_dir / config.cwd
    if not cwd.is_dir():
        raise UpstreamRefused(config.name, f"working directory does not exist: {cwd}")
    return cwd


class _StdoutNoise:
    """Non-protocol lines on a child's stdout: one named log line, at most every few seconds."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.suppressed = 0
        self.last = -NOISE_LOG_INTERVAL

    def report(self, line: bytes) -> None:
        now = time.monotonic()
        if now - self.last < NOISE_LOG_INTERVAL:
            self.suppressed += 1
            return
        more = f" (and {self.suppressed} more since)" if self.suppressed else ""
        logger.warning("server %s: ignored a line on stdout that is not JSON-RPC%s: %.120r",
                       self.server, more, line)
        self.last, self.suppressed = now, 0


async def _pump_stdout(
    process: Process, server: str, send: anyio.abc.ObjectSendStream[SessionMessage], max_bytes: int
) -> None:
    """Parse newline-delimited JSON-RPC from the child; anything else is logged and skipped."""
    assert process.stdout is not None
    noise = _StdoutNoise(server)
    pending = bytearray()  # appended to in place: a long line arrives in many chunks
    async with send:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in process.stdout:
                pending += chunk
                await _forward_lines(pending, server, send, noise)
                if len(pending) > max_bytes:
                    logger.error("server %s: a message over max_message_bytes (%d); closing the connection",
                                 server, max_bytes)
                    return


async def _forward_lines(
    pending: bytearray, server: str, send: anyio.abc.ObjectSendStream[SessionMessage], noise: _StdoutNoise
) -> None:
    """Send the complete lines of `pending` and keep only its unfinished tail.

    A function of its own so that the last line and message die with its frame: a loop variable
    would keep the last answer (a whole tools/list, parsed) alive until the child writes again.
    """
    start = 0
    while (end := pending.find(b"\n", start)) >= 0:
        with memoryview(pending) as view:
            line = bytes(view[start:end])  # one copy of a line that may be megabytes long
        start = end + 1
        if not line.strip():
            continue
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            message = salvage_tool_list(line, server)
            if message is None:
                noise.report(line)
                continue
        await send.send(SessionMessage(message))
    del pending[:start]


async def _pump_stdin(process: Process, receive: anyio.abc.ObjectReceiveStream[SessionMessage]) -> None:
    assert process.stdin is not None
    async with receive:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for item in receive:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send(data.encode())


async def _exited(process: Process, timeout: float) -> bool:
    """Poll for exit: `wait()` would also wait for pipe EOF, which a grandchild can hold open."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(0.02)
    return process.returncode is not None


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


async def _stop(process: Process) -> None:
    """Close stdin, then SIGTERM, then SIGKILL the child's group; always sweep the group at the end."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        assert process.stdin is not None
        await process.stdin.aclose()
    if not await _exited(process, EXIT_GRACE):
        _signal_group(process.pid, signal.SIGTERM)
        await _exited(process, EXIT_GRACE)
    _signal_group(process.pid, signal.SIGKILL)  # grandchildren that outlived their parent
    with anyio.move_on_after(EXIT_GRACE):
        await process.aclose()


@asynccontextmanager
async def stdio_transport(
    config: UpstreamConfig, config_dir: Path, errlog: IO[str], on_eof: Callable[[], None]
) -> AsyncIterator[tuple[anyio.abc.ObjectReceiveStream[SessionMessage], anyio.abc.ObjectSendStream[SessionMessage]]]:
    """Spawn the upstream and yield its (read, write) message streams; `on_eof` fires when it exits.

    The child gets the SDK's minimal safe environment plus its configured `env`, never ours.

    Raises:
        UpstreamRefused: the command or its working directory does not exist.
        OSError: the process could not be started.
    """
    assert config.command is not None
    command = resolve_command(config.command)
    if command is None:
        raise UpstreamRefused(config.name, f"command not found: {config.command!r} (PATH and {sys.prefix}/bin)")
    cwd = _working_directory(config, config_dir)
    process = await anyio.open_process(
        [command, *config.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog,
        env={**get_default_environment(), **config.env}, cwd=cwd, start_new_session=True,
    )
    to_session, read = anyio.create_memory_object_stream[SessionMessage](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def follow_stdout() -> None:
        try:
            await _pump_stdout(process, config.name, to_session, config.max_message_bytes)
        finally:
            on_eof()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow_stdout)
            tg.start_soon(_pump_stdin, process, from_session)
            try:
                yield read, write
            finally:
                with anyio.CancelScope(shield=True):
                    await write.aclose()
                    await _stop(process)
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await read.aclose()
