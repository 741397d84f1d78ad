"""The stdio transport: newline-delimited JSON-RPC on stdin/stdout, answering what the SDK would drop.

The SDK's `stdio_server` turns an unparsable line into an exception for the server, which logs it
and answers nothing: a batch, a request with malformed params, or a line of garbage leaves the
client waiting forever. Here each gets a JSON-RPC error (with the request's id when it has one).
Its stdin read also cannot be cancelled, so after SIGTERM a client holding stdin open kept the
process alive; this reader is abandoned on cancellation instead (the CLI then exits past it).

A pipe or a socket (how clients launch a server) is read and written on the event loop, by the
SDK session itself (`proxy.upstream`'s `MessageReader` and `MessageWriter`), without the SDK's
worker-thread hop per line and per write, or a relay task between the pipe and the session; a
terminal or a file, which the loop cannot poll, is read and written in a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from proxy.protocol import MessageReader, MessageWriter, encode, open_pipes, parsed_or

_Streams = tuple[
    anyio.abc.ObjectReceiveStream[SessionMessage | Exception], anyio.abc.ObjectSendStream[SessionMessage]
]


def rejection(line: bytes) -> types.JSONRPCError:
    """The error answering a line that is not a valid JSON-RPC message (id kept when there is one)."""
    try:
        document: Any = json.loads(line)
    except ValueError:
        return _error(None, types.PARSE_ERROR, "Parse error: the line is not JSON")
    if isinstance(document, list):
        return _error(None, types.INVALID_REQUEST, "Invalid request: JSON-RPC batches are not supported")
    ident = document.get("id") if isinstance(document, dict) else None
    if not isinstance(ident, str | int) or isinstance(ident, bool):
        ident = None
    if isinstance(document, dict) and isinstance(document.get("method"), str) and "params" in document:
        return _error(ident, types.INVALID_PARAMS, f"Invalid params for {document['method'][:100]!r}")
    return _error(ident, types.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message")


def _error(ident: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message))


def _read_line(stdin: BinaryIO) -> bytes:
    return stdin.readline()


def _pollable(stream: BinaryIO) -> bool:
    mode = os.fstat(stream.fileno()).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@asynccontextmanager
async def _wire(stdin: BinaryIO, stdout: BinaryIO) -> AsyncIterator[
        tuple[Callable[[], Awaitable[bytes]], Callable[[bytes], Awaitable[None]]]]:
    """(read a line, write bytes): on the loop for pipes and sockets, else in worker threads."""
    if not (_pollable(stdin) and _pollable(stdout)):
        lock = anyio.Lock()

        async def read_line() -> bytes:
            return await anyio.to_thread.run_sync(_read_line, stdin, abandon_on_cancel=True)

        async def write(data: bytes) -> None:
            async with lock:
                await anyio.to_thread.run_sync(_write, stdout, data)

        yield read_line, write
        return
    fds = (stdin.fileno(), stdout.fileno())
    blocking = [os.get_blocking(fd) for fd in fds]
    try:
        async with open_pipes(stdin, stdout.fileno()) as pipes:
            yield pipes.read_line, pipes.write
    finally:
        for fd, was in zip(fds, blocking, strict=True):
            os.set_blocking(fd, was)


@contextmanager
def _claimed_std_streams() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """The wire on private descriptors; fd 0 reads the null device and fd 1 goes to stderr meanwhile.

    A stray `print` or a child inheriting fd 1 then cannot corrupt the protocol. The private
    descriptors are never closed: an abandoned reader thread may still block on stdin's.
    """
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield os.fdopen(wire_in, "rb", closefd=False), os.fdopen(wire_out, "wb", closefd=False)
    finally:
        os.dup2(wire_out, 1)
        os.dup2(wire_in, 0)


@asynccontextmanager
async def stdio_transport() -> AsyncIterator[_Streams]:
    """Serve MCP over the process's stdin and stdout."""
    with _claimed_std_streams() as (stdin, stdout):
        async with _serve_streams(stdin, stdout) as streams:
            yield streams


@asynccontextmanager
async def _serve_streams(stdin: BinaryIO, stdout: BinaryIO) -> AsyncIterator[_Streams]:
    async with _wire(stdin, stdout) as (read_line, write_data):

        async def reject(line: bytes) -> None:
            with contextlib.suppress(OSError):  # stdout is gone: the session's own next write says so
                await write_data(encode(rejection(line)))

        yield MessageReader(read_line, parsed_or(reject)), MessageWriter(write_data)


def _write(stdout: BinaryIO, data: bytes) -> None:
    stdout.write(data)
    stdout.flush()
