"""Stdio framing on real pipes: lines in order, whole, whatever the pipe's room or a caller's cancel."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from proxy.protocol import LineTooLong, open_pipes
from proxy.protocol._framing import Pipes

pytestmark = pytest.mark.anyio


def _read_all(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            break
        data += chunk
    return data


async def test_a_write_cancelled_while_the_pipe_is_full_still_ends_its_line() -> None:
    into_us, _ours = os.pipe()  # what we would read: nothing here
    theirs, out = os.pipe()  # what we write; nobody reads it until the end
    os.set_blocking(out, False)
    big = b"x" * (1 << 20) + b"\n"
    try:
        with anyio.fail_after(30):
            async with open_pipes(os.fdopen(into_us, "rb", buffering=0), out) as pipes:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(pipes.write, big)
                    await anyio.wait_all_tasks_blocked()
                    tg.cancel_scope.cancel()  # the writer gives up with most of its line unwritten
                async with anyio.create_task_group() as tg:
                    tg.start_soon(pipes.write, b'{"after": true}\n')
                    received = await anyio.to_thread.run_sync(_read_all, theirs, len(big) + 16, abandon_on_cancel=True)
        assert received == big + b'{"after": true}\n'
    finally:
        for fd in (_ours, theirs, out):
            os.close(fd)


class Feed:
    """The writing end of the pipe the proxy reads, closed once (by the test to end the stream, or at the end)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closed = False

    def write(self, data: bytes) -> None:
        os.write(self.fd, data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)


@asynccontextmanager
async def reading(max_line: int | None = None) -> AsyncIterator[tuple[Pipes, Feed]]:
    """Pipes reading what the test feeds them (and writing where nobody reads), all bounded by 30 s."""
    theirs_in, into_us = os.pipe()
    out_r, out = os.pipe()
    feed = Feed(into_us)
    try:
        with anyio.fail_after(30):
            async with open_pipes(os.fdopen(theirs_in, "rb", buffering=0), out, max_line=max_line) as pipes:
                yield pipes, feed
    finally:
        feed.close()
        os.close(out_r)
        os.close(out)


async def test_lines_arrive_whole_in_any_chunks_and_the_rest_at_the_end() -> None:
    lines: list[bytes] = []
    async with reading() as (pipes, feed):

        async def read() -> None:
            while line := await pipes.read_line():
                lines.append(line)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            for chunk in (b'{"a"', b': 1}\n{"b": 2}\n{"c"', b": 3}"):
                await anyio.wait_all_tasks_blocked()  # the reader waits with part of a line
                feed.write(chunk)
            feed.close()
    assert lines == [b'{"a": 1}\n', b'{"b": 2}\n', b'{"c": 3}']


@pytest.mark.parametrize("ended", [True, False], ids=["whole line", "no newline yet"])
async def test_a_line_over_the_limit_is_refused_whether_or_not_it_has_ended(ended: bool) -> None:
    async with reading(max_line=1000) as (pipes, feed):
        feed.write(b"x" * 5000 + (b"\n" if ended else b""))
        with pytest.raises(LineTooLong):
            await pipes.read_line()


async def test_a_line_longer_than_the_read_ahead_arrives_whole() -> None:
    """Reading pauses at PAUSE_AT unread bytes and resumes as they are read: a 2 MiB line still arrives."""
    big = b"y" * (2 << 20) + b"\n"
    async with reading() as (pipes, feed), anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, feed.write, big)
        assert await pipes.read_line() == big
