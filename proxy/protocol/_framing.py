"""Newline-delimited JSON-RPC on non-blocking pipes, as the message streams the SDK reads and writes.

Both stdio sides use it: an upstream child's pipes, and downstream our own stdin and stdout. The
SDK session reads and writes the descriptors through these streams itself, on the event loop:
with a pump task and a memory stream between the pipe and the session, every message cost two
task switches more each way, and the SDK's own stdio transports add a worker-thread hop per line.

Reading is the loop's: it reads a pipe as soon as it is readable (asyncio's pipe transport, one
registration for the pipe's life), where a wait per line would register and unregister the
descriptor each time. A write that fits the pipe is done at once; the rest of a message the pipe
cannot take yet is left to a flusher task, so a caller cancelled mid-message never leaves half a
line on the wire.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
import anyio.lowlevel
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage, jsonrpc_message_adapter

__all__ = ["LineTooLong", "MessageReader", "MessageWriter", "Parse", "Pipes", "encode", "open_pipes", "parsed_or"]

PAUSE_AT = 1 << 20  # unread bytes at which the loop stops reading a pipe until they are read
YIELD_EVERY = 32  # skipped lines in a row between two yields to the loop


class LineTooLong(Exception):
    """The peer sent more than the limit without ending a line."""


def encode(message: Any) -> bytes:
    """One JSON-RPC message (or error) as a line of the wire."""
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


class _Inbox(asyncio.Protocol):
    """What the loop has read from a pipe: it reads whenever the pipe is readable (one registration
    for the pipe's life, not one per wait), pausing while `PAUSE_AT` bytes wait unread."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.ended = False
        self.error: BaseException | None = None
        self.paused = False
        self.transport: asyncio.ReadTransport | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > PAUSE_AT and self.transport is not None and not self.paused:
            self.transport.pause_reading()
            self.paused = True
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self.ended, self.error = True, exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def more(self) -> None:
        """Wait for more input (or its end)."""
        if self.paused and self.transport is not None:
            self.transport.resume_reading()
            self.paused = False
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


class Pipes:
    """Lines from one pipe, writes to another (a non-blocking descriptor). Made by `open_pipes`.

    Only one task reads; any number may write.
    """

    def __init__(self, inbox: _Inbox, write_fd: int, max_line: int | None) -> None:
        self._inbox, self.write_fd, self.max_line = inbox, write_fd, max_line
        self._scanned = 0  # no newline in the buffer before this
        self._queued = 0  # writes handed to the flusher and not yet written
        self._error: OSError | None = None
        self._backlog: deque[tuple[memoryview, anyio.Event]] = deque()
        self._wake = anyio.Event()

    async def read_line(self) -> bytes:
        """The next line with its newline; the rest without one at end of input, then b"".

        Raises:
            LineTooLong: a line (or what has arrived of it) is longer than `max_line` bytes.
            OSError: reading failed.
        """
        inbox = self._inbox
        buffer = inbox.buffer
        while (end := buffer.find(b"\n", self._scanned)) < 0:
            self._scanned = len(buffer)
            if self.max_line is not None and self._scanned > self.max_line:
                raise LineTooLong(f"over {self.max_line} bytes without a newline")
            if inbox.ended:
                if isinstance(inbox.error, OSError):
                    raise inbox.error
                rest = bytes(buffer)
                buffer.clear()
                self._scanned = 0
                return rest
            await inbox.more()
        if self.max_line is not None and end > self.max_line:  # a whole line read ahead is held to it too
            raise LineTooLong(f"a line of over {self.max_line} bytes")
        with memoryview(buffer) as view:
            line = bytes(view[: end + 1])  # one copy of a line that may be megabytes long
        del buffer[: end + 1]
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
        else:
            written = 0
        done = anyio.Event()
        self._queued += 1
        self._backlog.append((memoryview(data)[written:], done))  # the rest, not a copy of it
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


@asynccontextmanager
async def open_pipes(
    read: BinaryIO, write_fd: int, *, max_line: int | None = None,
    before_close: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[Pipes]:
    """`Pipes` reading the pipe `read` and writing the descriptor `write_fd` (made non-blocking here).

    On the way out, once nothing waits on `write_fd` any more, `before_close` runs (shielded; e.g.
    close it and stop the child), then the loop's transport closes `read` (the file object: one
    opened with `closefd=False` keeps its descriptor).
    """
    os.set_blocking(write_fd, False)
    inbox = _Inbox()
    transport: asyncio.BaseTransport | None = None
    try:
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: inbox, read)
        pipes = Pipes(inbox, write_fd, max_line)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pipes.flush)
            try:
                yield pipes
            finally:
                tg.cancel_scope.cancel()
    finally:
        try:
            if before_close is not None:
                with anyio.CancelScope(shield=True):
                    await before_close()
        finally:
            if transport is not None:
                transport.close()


Parse = Callable[[bytes], Awaitable[JSONRPCMessage | None]]


def parsed_or(on_invalid: Parse) -> Parse:
    """The plain parse of a line: one that is not JSON-RPC goes to `on_invalid`, which returns a message to
    deliver in its place, or None to skip it."""

    async def parse(line: bytes) -> JSONRPCMessage | None:
        try:
            return jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            return await on_invalid(line)

    return parse


class MessageReader(ObjectReceiveStream[SessionMessage | Exception]):
    """The session's read stream: each line parsed by `parse` (see `parsed_or`), which returns None for a line
    to skip. `on_end` runs once when the input ends or fails.

    A run of skipped lines yields to the loop every `YIELD_EVERY` lines: a peer's flood of them must not hold
    the loop while it is read.
    """

    def __init__(
        self,
        read_line: Callable[[], Awaitable[bytes]],
        parse: Parse,
        on_end: Callable[[BaseException | None], None] = lambda error: None,
    ) -> None:
        self._read_line, self._parse, self._on_end = read_line, parse, on_end
        self._ended = False

    async def receive(self) -> SessionMessage | Exception:
        if self._ended:
            raise anyio.EndOfStream
        skipped = 0
        while True:
            try:
                line = await self._read_line()
            except (OSError, LineTooLong) as exc:
                self._end(exc)
                raise anyio.EndOfStream from exc
            if not line:
                self._end(None)
                raise anyio.EndOfStream
            message = await self._parse(line) if line.strip() else None
            if message is not None:
                return SessionMessage(message)
            skipped += 1
            if skipped % YIELD_EVERY == 0:
                await anyio.lowlevel.checkpoint()

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
