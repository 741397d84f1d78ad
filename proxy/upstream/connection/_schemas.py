"""Listed tools' output schemas, held for the SDK compactly until a call needs one.

The SDK keeps every listed tool's `output_schema` for as long as the connection lives, to validate
call results against it: the very dict on the `Tool` its `list_tools` returned, parsed (~2 KB of
Python objects a tool; 25 MB at 50,000 tools, born amid each listing's transient parse, so they
also pin the allocator's memory around them). `OutputSchemas` keeps each schema as compressed JSON
and empties that dict once listed; just before a tool is called it puts the schema back, so the
SDK still validates every result against the real schema, and keeps it parsed (with its compiled
validator) only for the tools that are called. Were the SDK ever to keep a copy instead, emptying
ours would cost memory, never correctness.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from mcp import types


class OutputSchemas:
    """One connection's listed output schemas: name → (the dict the SDK holds, its compressed JSON)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[dict[str, Any], bytes]] = {}

    def adopt(self, listed: list[types.Tool], offered: list[types.Tool]) -> list[types.Tool]:
        """Take over the schemas of a complete listing; `offered` (those of `listed` that may be called) are
        returned with their own (shallow) copy, and only theirs are kept. Every listed tool's dict is
        emptied: the SDK holds them all. Tools no longer listed are forgotten.
        """
        self._held = {}
        kept = [self._take(tool) for tool in offered]
        for tool in listed:
            if tool.output_schema:
                tool.output_schema.clear()
        return kept

    def _take(self, tool: types.Tool) -> types.Tool:
        schema = tool.output_schema
        if not schema:
            return tool
        self._held[tool.name] = (schema, zlib.compress(json.dumps(schema, separators=(",", ":")).encode()))
        return tool.model_copy(update={"output_schema": dict(schema)})

    def restore(self, name: str) -> None:
        """Put `name`'s schema back where the SDK reads it, before a call whose result it validates."""
        held = self._held.get(name)
        if held is not None and not held[0]:
            held[0].update(json.loads(zlib.decompress(held[1])))
