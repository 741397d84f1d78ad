"""Stdio framing on real pipes: lines in order, whole, whatever the pipe's room or a caller's cancel."""

from __future__ import annotations

import os

import anyio
import pytest

from proxy.upstream import open_pipes

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


async def test_lines_arrive_whole_in_any_chunks_and_the_rest_at_the_end() -> None:
    theirs_in, into_us = os.pipe()
    _out_r, out = os.pipe()
    try:
        with anyio.fail_after(30):
            async with open_pipes(os.fdopen(theirs_in, "rb", buffering=0), out) as pipes:
                for chunk in (b'{"a"', b': 1}\n{"b": 2}\n{"c"', b": 3}"):
                    os.write(into_us, chunk)
                os.close(into_us)
                lines = [await pipes.read_line() for _ in range(4)]
        assert lines == [b'{"a": 1}\n', b'{"b": 2}\n', b'{"c": 3}', b""]
    finally:
        os.close(_out_r)
        os.close(out)
