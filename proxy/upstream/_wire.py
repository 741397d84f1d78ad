"""Newline-delimited JSON-RPC on non-blocking pipes, as the message streams the SDK reads and writes.

Both stdio sides use it: an upstream child's pipes, and downstream our own stdin and stdout. The
SDK session reads and writes the descriptors through these streams itself, on the event loop:
with a pump task and a memory stream between the pipe and the session, every message cost two
task switches more each way, and the SDK's own stdio transports add a worker-thread hop per line.

A write that fits the pipe is done at once; the rest of a message the pipe cannot take yet is
left to a flusher task, so a caller cancelled mid-message never leaves half a line on the wire.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage, jsonrpc_message_adapter

__all__ = ["LineTooLong", "MessageReader", "MessageWriter", "Pipes", "encode"]

READ_CHUNK = 1 << 16


class LineTooLong(Exception):
    """The peer sent more than the limit without ending a line."""


def encode(message: Any) -> bytes:
    """One JSON-RPC message (or error) as a line of the wire."""
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


class Pipes:
    """Lines from one non-blocking descriptor, writes to another; `flush` must run in a task while in use.

    Only one task reads; any number may write.
    """

    def __init__(self, read_fd: int, write_fd: int, *, max_line: int | None = None) -> None:
        self.read_fd, self.write_fd, self.max_line = read_fd, write_fd, max_line
        self._buffer = bytearray()
        self._scanned = 0  # no newline in the buffer before this
        self._queued = 0  # writes handed to the flusher and not yet written
        self._error: OSError | None = None
        self._backlog: deque[tuple[memoryview, anyio.Event]] = deque()
        self._wake = anyio.Event()

    async def read_line(self) -> bytes:
        """The next line with its newline; the rest without one at end of input, then b"".

        Raises:
            LineTooLong: `max_line` bytes arrived without a newline.
            OSError: the descriptor failed.
        """
        while (end := self._buffer.find(b"\n", self._scanned)) < 0:
            self._scanned = len(self._buffer)
            if self.max_line is not None and self._scanned > self.max_line:
                raise LineTooLong(f"over {self.max_line} bytes without a newline")
            try:
                chunk = os.read(self.read_fd, READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.read_fd)
                continue
            if not chunk:
                rest = bytes(self._buffer)
                self._buffer.clear()
                self._scanned = 0
                return rest
            self._buffer += chunk
        with memoryview(self._buffer) as view:
            line = bytes(view[: end + 1])  # one copy of a line that may be megabytes long
        del self._buffer[: end + 1]
        self._scanned = 0
        return line

    async def write(self, data: bytes) -> None:
        """Write all of `data` after every earlier write; returns once it is all in the pipe.

        Raises:
            OSError: the descriptor failed (e.g. the reader is gone), now or for an earlier write.
        """
        if self._error is not None:
            raise self._error
        if not self._queued:
            try:
                written = os.write(self.write_fd, data)
            except BlockingIOError:
                written = 0
            if written == len(data):
                return
            data = data[written:]
        done = anyio.Event()
        self._queued += 1
        self._backlog.append((memoryview(data), done))
        self._wake.set()
        await done.wait()
        if self._error is not None:
            raise self._error

    async def flush(self) -> None:
        """Write what did not fit the pipe at once, in order, until cancelled."""
        while True:
            if not self._backlog:
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            view, done = self._backlog.popleft()
            try:
                while view and self._error is None:
                    try:
                        view = view[os.write(self.write_fd, view):]
                    except BlockingIOError:
                        await anyio.wait_writable(self.write_fd)
            except OSError as exc:
                self._error = exc
            finally:
                self._queued -= 1
                done.set()


class MessageReader(ObjectReceiveStream[SessionMessage | Exception]):
    """The session's read stream: each line parsed as JSON-RPC.

    `on_invalid` gets a line that is not JSON-RPC and returns a message to deliver in its place,
    or None to skip it. `on_end` runs once when the input ends or fails.
    """

    def __init__(
        self,
        read_line: Callable[[], Awaitable[bytes]],
        on_invalid: Callable[[bytes], Awaitable[JSONRPCMessage | None]],
        on_end: Callable[[BaseException | None], None] = lambda error: None,
    ) -> None:
        self._read_line, self._on_invalid, self._on_end = read_line, on_invalid, on_end
        self._ended = False

    async def receive(self) -> SessionMessage | Exception:
        if self._ended:
            raise anyio.EndOfStream
        while True:
            try:
                line = await self._read_line()
            except (OSError, LineTooLong) as exc:
                self._end(exc)
                raise anyio.EndOfStream from exc
            if not line:
                self._end(None)
                raise anyio.EndOfStream
            if not line.strip():
                continue
            try:
                message: JSONRPCMessage | None = jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                message = await self._on_invalid(line)
                if message is None:
                    continue
            return SessionMessage(message)

    def _end(self, error: BaseException | None) -> None:
        if not self._ended:
            self._ended = True
            self._on_end(error)

    async def aclose(self) -> None:
        self._ended = True


class MessageWriter(ObjectSendStream[SessionMessage]):
    """The session's write stream: each message as one line.

    A failed write (the reader is gone) raises `BrokenResourceError`, as a memory stream whose
    receiver is gone would.
    """

    def __init__(self, write: Callable[[bytes], Awaitable[None]]) -> None:
        self._write = write
        self._closed = False

    async def send(self, item: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            await self._write(encode(item.message))
        except OSError as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._closed = True
