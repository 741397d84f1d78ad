"""The stdio transport: newline-delimited JSON-RPC on stdin/stdout, answering what the SDK would drop.

The SDK's `stdio_server` turns an unparsable line into an exception for the server, which logs it
and answers nothing: a batch, a request with malformed params, or a line of garbage leaves the
client waiting forever. Here each gets a JSON-RPC error (with the request's id when it has one).
Its stdin read also cannot be cancelled, so after SIGTERM a client holding stdin open kept the
process alive; this reader is abandoned on cancellation instead (the CLI then exits past it).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

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
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    lock = anyio.Lock()

    async def write(message: types.JSONRPCMessage | types.JSONRPCError) -> None:
        data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        async with lock:
            await anyio.to_thread.run_sync(_write, stdout, data)

    async def read() -> None:
        async with to_server:
            while line := await anyio.to_thread.run_sync(_read_line, stdin, abandon_on_cancel=True):
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError:
                    await write(rejection(line))
                    continue
                await to_server.send(SessionMessage(message))

    async def relay() -> None:
        async with from_server:
            async for session_message in from_server:
                await write(session_message.message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(relay)
        try:
            yield from_client, to_client
        finally:
            tg.cancel_scope.cancel()


def _write(stdout: BinaryIO, data: bytes) -> None:
    stdout.write(data)
    stdout.flush()
