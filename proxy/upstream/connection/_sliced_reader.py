"""Reading a large or unreadable message from an upstream one value at a time: a tools/list answer tool
by tool, held to per-server caps, yielding to the event loop as it goes.

The SDK parses a message in one call that holds the GIL (5 s for 200,000 tools on a loaded machine,
every other upstream's calls stalled meanwhile; a worker thread is no help), and with a nesting
limit, so one tool nested too deep made a whole answer unreadable. Here each tool is read on its own
with the standard library: one too deep, too large or invalid is dropped with a warning naming it,
and the rest go through, within `MAX_TOOLS`, `MAX_TOOL_CHARS` and `MAX_LIST_CHARS`. The SDK then
parses only what was kept.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio.lowlevel
from mcp import types
from mcp.types import jsonrpc_message_adapter

from proxy.upstream.connection._limits import MAX_DESCRIPTION_CHARS, MAX_TOOLS, cut_description

logger = logging.getLogger(__name__)

__all__ = ["MAX_LIST_CHARS", "MAX_TOOL_CHARS", "MAX_TOOL_DEPTH", "read_message"]

MAX_TOOL_DEPTH = 128  # JSON nesting levels one tool definition may use (real tools: up to 22)
MAX_TOOL_CHARS = 256 * 1024  # one tool's JSON, its description aside (the largest real tool: 27 KB)
MAX_LIST_CHARS = 8 << 20  # the tools kept from one answer, as JSON (the largest real server: 0.6 MB)
SLICE_SECONDS = 0.02  # work between two yields to the event loop
DECODED_AT_ONCE = 4 << 20  # bytes of a line decoded between two yields
RUN_CHARS = 1 << 20  # a run of a tool list free of quotes and backslashes keeps about this much (`_shortened`)
NAMED_SKIPS = 5  # tools of one answer skipped with a warning each; the rest are counted

_decoder = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.){0,200})"')


class _Unreadable(ValueError):
    """The text is not one JSON object, or one of its values outside `result.tools` cannot be read."""


def _depth(value: Any) -> int:
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            todo.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


@dataclass
class _Text:
    """A cursor over the message's text."""

    text: str
    pos: int = 0
    yielded: float = field(default_factory=time.perf_counter)

    def peek(self) -> str:
        self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]  # it matches the empty string
        return self.text[self.pos:self.pos + 1]

    def take(self, char: str) -> None:
        if self.peek() != char:
            raise _Unreadable(f"expected {char!r} at {self.pos}")
        self.pos += 1

    def value(self) -> Any:
        self.peek()
        try:
            found, self.pos = _decoder.raw_decode(self.text, self.pos)
        except (ValueError, RecursionError) as exc:
            raise _Unreadable(str(exc)) from exc
        return found

    def skip_value(self) -> None:
        """Step over a value too deep to decode, counting brackets without recursion."""
        level = 0
        for token in _TOKEN.finditer(self.text, self.pos):
            char = token.group()
            level += char in "[{"
            level -= char in "]}"
            if level <= 0:
                self.pos = token.end()
                return
        raise _Unreadable("a value does not end")

    async def members(self) -> AsyncIterator[str]:
        """The key of each member of the object here, each time with the cursor on its value (the caller reads it)."""
        self.take("{")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise _Unreadable(f"a key that is not a string at {self.pos}")
            self.take(":")
            yield key
            if self.peek() == "}":
                self.pos += 1
                return
            self.take(",")

    async def pause(self) -> None:
        if time.perf_counter() - self.yielded > SLICE_SECONDS:
            await anyio.lowlevel.checkpoint()
            self.yielded = time.perf_counter()


@dataclass
class _Listing:
    """The tools kept from one answer, and what was left out."""

    server: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    chars: int = 0
    skipped: int = 0
    over: int = 0
    cut: int = 0

    def skip(self, name: object, reason: str) -> None:
        self.skipped += 1
        if self.skipped <= NAMED_SKIPS:
            logger.warning("server %s: tool %.80r skipped: %s", self.server, name, reason)

    def consider(self, tool: Any, chars: int) -> None:
        if not isinstance(tool, dict):
            return self.skip(None, "it is not an object")
        if _depth(tool) > MAX_TOOL_DEPTH:
            return self.skip(tool.get("name"), f"its definition nests deeper than {MAX_TOOL_DEPTH} levels")
        described = tool.get("description")
        # The description's JSON as written is at most as long as with every non-ASCII character escaped.
        rest = chars - len(json.dumps(described)) if isinstance(described, str) else chars
        if rest > MAX_TOOL_CHARS:
            return self.skip(tool.get("name"), f"its definition is over {MAX_TOOL_CHARS // 1024} KiB")
        if isinstance(described, str) and (short := cut_description(described)) is not described:
            tool["description"], chars, self.cut = short, rest + len(json.dumps(short)), self.cut + 1
        if len(self.tools) >= MAX_TOOLS or self.chars + chars > MAX_LIST_CHARS:
            self.over += 1
            return None
        try:
            types.Tool.model_validate(tool)
        except ValueError as exc:
            errors = getattr(exc, "error_count", lambda: 1)()
            return self.skip(tool.get("name"), f"its definition is invalid ({errors} errors)")
        self.tools.append(tool)
        self.chars += chars
        return None

    def report(self) -> None:
        if self.skipped > NAMED_SKIPS:
            logger.warning("server %s: %d more tools skipped", self.server, self.skipped - NAMED_SKIPS)
        if self.cut:
            logger.warning("server %s: %d tool descriptions cut to the cap of %d characters",
                           self.server, self.cut, MAX_DESCRIPTION_CHARS)
        if self.over:
            logger.warning("server %s: %d tools dropped: over the caps of %d tools or %d MiB of tool JSON a listing",
                           self.server, self.over, MAX_TOOLS, MAX_LIST_CHARS >> 20)


async def _tools(text: _Text, server: str) -> list[dict[str, Any]]:
    listing = _Listing(server)
    text.take("[")
    text.text = await _shortened(text.text, text.pos)  # what follows is the tools and the end of the message
    while text.peek() != "]":
        start = text.pos
        try:
            tool, text.pos = _decoder.raw_decode(text.text, start)
        except RecursionError:
            text.skip_value()
            name = _NAME.search(text.text, start, text.pos)
            listing.skip(name and name.group(1), f"its definition nests deeper than {MAX_TOOL_DEPTH} levels")
        except ValueError as exc:
            raise _Unreadable(str(exc)) from exc
        else:
            listing.consider(tool, text.pos - start)
        await text.pause()
        if text.peek() == ",":
            text.pos += 1
    text.pos += 1
    listing.report()
    return listing.tools


async def _object(text: _Text, server: str, *, in_result: bool = False) -> dict[str, Any]:
    found: dict[str, Any] = {}
    async for key in text.members():
        if key == "result" and not in_result and text.peek() == "{":
            found[key] = await _object(text, server, in_result=True)
        elif key == "tools" and in_result and text.peek() == "[":
            found[key] = await _tools(text, server)
        else:
            found[key] = text.value()
    return found


async def _shortened(text: str, start: int) -> str:
    """`text` with the middle of every very long run after `start` free of quotes and backslashes taken out:
    such a run lies inside one string (or is whitespace), so the JSON stays valid, and a tool's 50 MB
    description costs a few `find`s instead of a decode of 50 MB in one call (0.7 s on a loaded machine).
    A run keeps its first `RUN_CHARS` or more, more than any cap keeps of a text."""
    kept: list[str] = []  # text[:done], less what was cut
    done, free_before = 0, False
    for at in range(start, len(text), RUN_CHARS):
        end = min(at + RUN_CHARS, len(text))
        free = text.find('"', at, end) < 0 and text.find("\\", at, end) < 0
        if free and free_before:
            kept.append(text[done:at])
            done = end
        free_before = free
        await anyio.lowlevel.checkpoint()
    return "".join([*kept, text[done:]]) if kept else text


async def _decoded(line: bytes) -> str:
    """`line` as text, decoded a slice at a time (50 MB at once held the loop for a quarter of a second)."""
    if len(line) <= DECODED_AT_ONCE:
        return line.decode()
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts = []
    with memoryview(line) as view:
        for at in range(0, len(line), DECODED_AT_ONCE):
            parts.append(decoder.decode(view[at:at + DECODED_AT_ONCE], final=at + DECODED_AT_ONCE >= len(line)))
            await anyio.lowlevel.checkpoint()
    return "".join(parts)


async def read_message(line: bytes, server: str) -> types.JSONRPCMessage | None:
    """The message on `line` with its tools (if it is a tools/list answer) held to the caps, or None if it is
    not a JSON-RPC message even so."""
    try:
        text = _Text(await _decoded(line))
        message = await _object(text, server)
        if text.peek():
            return None
        return jsonrpc_message_adapter.validate_python(message, by_name=False)
    except (UnicodeDecodeError, _Unreadable, ValueError):
        return None
