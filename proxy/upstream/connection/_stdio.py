"""Stdio upstreams: the child process, its pipes as an MCP transport, and its whole process group.

We own the process (through anyio's public process API) instead of using the SDK's stdio client,
because we need what it does not expose: the child's pid. The child leads a new session, so on
exit its whole group goes — grandchildren included — and the end of its stdout is an event the
supervisor waits on, so a crash is seen at once rather than at the next ping. It starts under
`connection/_watchdog`, so its group goes with toolbridge too, even when toolbridge is SIGKILLed. The session reads and
writes the pipes itself (`_framing`), with no pump task between them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

import anyio
from anyio.abc import Process
from mcp.types import JSONRPCMessage, jsonrpc_message_adapter

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamRefused
from proxy.protocol import LineTooLong, MessageReader, MessageWriter, Pipes, open_pipes
from proxy.upstream.connection._environment import child_environment
from proxy.upstream.connection._sliced_reader import read_message

logger = logging.getLogger(__name__)

EXIT_GRACE = 2.0  # after stdin closes, then again after SIGTERM (the SDK's and the spec's order)
NOISE_LOG_INTERVAL = 10.0
LARGE_LINE = 1 << 20  # a line longer than this is read a value at a time, never in one parse
WATCHDOG = str(Path(__file__).with_name("_watchdog.py"))  # ties the child's group to our life
LIST_CHANGED = frozenset(f"notifications/{kind}/list_changed" for kind in ("tools", "prompts", "resources"))


def resolve_command(command: str) -> str | None:
    """Find `command` on PATH, then next to the running interpreter (the venv's bin/)."""
    return shutil.which(command) or shutil.which(command, path=str(Path(sys.executable).parent))


def _working_directory(config: UpstreamConfig, config_dir: Path) -> Path:
    """`cwd:` (relative to the config dir), else the config dir itself: never the directory a client
    happened to launch toolbridge from, so `args: ["."]` means the same place from every client."""
    cwd = config_dir if config.cwd is None else Path(config.cwd)
    cwd = (cwd if cwd.is_absolute() else config_dir / cwd).absolute()
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


def _list_changed(line: bytes) -> bool:
    """Whether `line` is a bare list_changed notification (one without params), cheaply."""
    if len(line) > 200 or b"list_changed" not in line:
        return False
    try:
        data = json.loads(line)
    except ValueError:
        return False
    return (isinstance(data, dict) and data.get("method") in LIST_CHANGED and not data.get("params")
            and set(data) <= {"jsonrpc", "method", "params"})


def _reader(pipes: Pipes, server: str, on_changed: Callable[[], None], on_eof: Callable[[], None]) -> MessageReader:
    """The child's stdout as messages.

    A list_changed notification goes straight to `on_changed`: a flood of them (100,000) costs a flag each,
    not the SDK's handling of a message each. A line over `LARGE_LINE`, or one the SDK cannot parse (a
    tool nested too deep), is read tool by tool within the caps (`connection/_sliced_reader`); a line that is not
    JSON-RPC even so is logged and skipped. The end of the output (or a line over `max_message_bytes`)
    fires `on_eof`.
    """
    noise = _StdoutNoise(server)

    async def parse(line: bytes) -> JSONRPCMessage | None:
        if _list_changed(line):
            on_changed()
            return None
        if len(line) <= LARGE_LINE:
            try:
                return jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                pass
        message = await read_message(line, server)
        if message is None:
            noise.report(line)
        return message

    def on_end(error: BaseException | None) -> None:
        if isinstance(error, LineTooLong):
            logger.error("server %s: a message over max_message_bytes (%d); closing the connection",
                         server, pipes.max_line)
        on_eof()

    return MessageReader(pipes.read_line, parse, on_end)


async def _exited(process: Process, timeout: float) -> bool:
    """Poll for exit: `wait()` would also wait for pipe EOF, which a grandchild can hold open."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(0.02)
    return process.returncode is not None


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


async def _stop(process: Process, stdin: int) -> None:
    """Close stdin, then SIGTERM, then SIGKILL the child's group; always sweep the group at the end."""
    os.close(stdin)
    if not await _exited(process, EXIT_GRACE):
        _signal_group(process.pid, signal.SIGTERM)
        await _exited(process, EXIT_GRACE)
    _signal_group(process.pid, signal.SIGKILL)  # grandchildren that outlived their parent
    with anyio.move_on_after(EXIT_GRACE):
        await process.aclose()


@asynccontextmanager
async def stdio_transport(
    config: UpstreamConfig, config_dir: Path, errlog: IO[str], on_changed: Callable[[], None],
    on_eof: Callable[[], None],
) -> AsyncIterator[tuple[MessageReader, MessageWriter]]:
    """Spawn the upstream and yield its (read, write) message streams; `on_changed` fires for each list_changed
    notification (they never reach the SDK), `on_eof` when it exits.

    The child gets the network, CA, package-manager and locale part of ours plus its configured `env`, never
    our secrets, plus the chain of config dirs being served, by which a toolbridge child refuses to serve its
    parent's (`connection/_environment`).

    Raises:
        UpstreamRefused: the command or its working directory does not exist.
        OSError: the process could not be started.
    """
    assert config.command is not None
    command = resolve_command(config.command)
    if command is None:
        raise UpstreamRefused(config.name, f"command not found: {config.command!r} (PATH and {sys.prefix}/bin)")
    cwd = _working_directory(config, config_dir)
    child_stdin, stdin = os.pipe()
    stdout, child_stdout = os.pipe()
    watched, alive = os.pipe()  # the child's group is killed when `alive` closes: at the end of stop(), or our death
    try:
        process = await anyio.open_process(
            [sys.executable, "-I", "-S", WATCHDOG, str(watched), command, *config.args], stdin=child_stdin,
            stdout=child_stdout, stderr=errlog, env=child_environment(config, os.environ), cwd=cwd,
            start_new_session=True, pass_fds=(watched,),
        )
    except BaseException:
        for fd in (stdin, stdout, alive):
            os.close(fd)
        raise
    finally:
        for fd in (child_stdin, child_stdout, watched):
            os.close(fd)

    async def stop() -> None:
        try:
            await _stop(process, stdin)
        finally:
            os.close(alive)

    # The child is stopped before its stdout closes (it may still write while it exits).
    async with open_pipes(os.fdopen(stdout, "rb", buffering=0), stdin, max_line=config.max_message_bytes,
                          before_close=stop) as pipes:
        yield _reader(pipes, config.name, on_changed, on_eof), MessageWriter(pipes.write)
