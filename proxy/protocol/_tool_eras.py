"""A tool definition as each era's clients may be sent it.

The 2026-07-28 era takes any JSON Schema as a tool's `outputSchema`: an array, a top-level `$ref` into
`$defs`, an `anyOf`, a scalar. The handshake era takes only an object schema (`"type": "object"`), and a
list with one tool it cannot take fails as a whole. Such a tool reaches a handshake-era client without its
output schema, the one field that era cannot carry: that client then checks no `structuredContent` against
it, and a value that is not an object travels as text (`downstream/calls`), so the tool is listed and called
in both eras rather than dropped in both.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp import types

__all__ = ["for_handshake_era"]


def _handshake_era_shaped(tool: types.Tool) -> types.Tool:
    schema = tool.output_schema
    if schema is None or schema.get("type") == "object":
        return tool
    return tool.model_copy(update={"output_schema": None})


def for_handshake_era(tools: Iterable[types.Tool]) -> list[types.Tool]:
    """`tools` as a handshake-era `tools/list` carries them: an output schema that is not an object's left out."""
    return [_handshake_era_shaped(tool) for tool in tools]
