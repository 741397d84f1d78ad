"""Checking `tool_call` arguments before they reach an upstream.

Models often send `"5"` for 5 or `"true"` for true; those are coerced per the schema. Then the
required keys are checked, then the JSON Schema (off the event loop, bounded: `calls/_validation`). A
schema that cannot be used (invalid, an external `$ref`, too slow) lets the call through: the
upstream is the final judge, we only save a round trip. A `null` given for a property mirrored into
an `Mcp-Param-*` header is checked as not given: the spec (SEP-2243) treats the two alike (the header
is omitted), though the property's type, which must be a scalar, never admits `null`.

A tool called again is checked with what its first call prepared (`check_call`): its schema, not
read back from the registry's compressed definition, and its validator.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proxy.errors import InvalidArguments
from proxy.registry import ToolEntry

if TYPE_CHECKING:
    from proxy.downstream.calls._validation import PreparedSchema

PREPARED_TOOLS = 256  # tools whose prepared checks are kept (the ones called last)


def _types_of(schema: Any) -> list[str]:
    if not isinstance(schema, Mapping):
        return []
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    return []


def _coerce_value(value: Any, schema: Any) -> Any:
    """Turn a string into the number, boolean or JSON value the schema asks for, if it parses."""
    types = _types_of(schema)
    if not isinstance(value, str) or not types or "string" in types:
        return value
    text = value.strip()
    for kind in types:
        if kind == "integer":
            try:
                return int(text)
            except ValueError:
                continue
        if kind == "number":
            try:
                number = float(text)
            except ValueError:
                continue
            return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind in ("object", "array"):
            try:
                parsed = json.loads(text)
            except ValueError:
                continue
            if isinstance(parsed, dict if kind == "object" else list):
                return parsed
        if kind == "null" and text.lower() in ("null", "none"):
            return None
    return value


def coerce_arguments(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Coerce string-typed top-level values to the types the schema's properties declare."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return dict(arguments)
    return {key: _coerce_value(value, properties.get(key)) for key, value in arguments.items()}


def _without_null_at(node: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """`node` without the `null` at `path` (copied along the way; `node` itself when there is none)."""
    key, rest = path[0], path[1:]
    value = node.get(key, ...)
    if not rest:
        return {k: v for k, v in node.items() if k != key} if value is None else node
    if not isinstance(value, dict):
        return node
    inner = _without_null_at(value, rest)
    return node if inner is value else {**node, key: inner}


def _path(parts: Any) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


async def check_arguments(
    arguments: Mapping[str, Any] | None, schema: Mapping[str, Any] | PreparedSchema
) -> dict[str, Any]:
    """Coerce, then check required keys and the whole JSON Schema; return the arguments to send upstream.

    Raises:
        InvalidArguments: the call must not be made, with the path (`arguments.size_gb`), the failed
            constraint and the schema.
    """
    from proxy.downstream.calls._validation import PreparedSchema, find_error  # jsonschema: imported by the first call

    prepared = schema if isinstance(schema, PreparedSchema) else PreparedSchema(schema)
    schema = prepared.schema
    coerced = coerce_arguments(arguments or {}, schema)
    judged = coerced
    for path in prepared.header_paths:
        judged = _without_null_at(judged, path)
    required = schema.get("required")
    if isinstance(required, list):
        missing = [key for key in required if isinstance(key, str) and key not in judged]
        if missing:
            # What is wrong with the arguments given too: a model that fixes only the missing ones pays a turn more.
            given = {key: value for key, value in schema.items() if key != "required"}
            also = await find_error(judged, PreparedSchema(given)) if judged else None
            more = f"; also arguments{_path(also.absolute_path)}: {also.message}" if also is not None else ""
            raise InvalidArguments(
                f"missing required argument{'s' if len(missing) > 1 else ''}: {', '.join(missing)}{more}",
                f"arguments.{missing[0]}",
                "required",
                dict(schema),
            )
    error = await find_error(judged, prepared)
    if error is not None:
        raise InvalidArguments(
            error.message, "arguments" + _path(error.absolute_path), str(error.validator), dict(schema)
        )
    return coerced


@functools.lru_cache(maxsize=PREPARED_TOOLS)
def _prepared(entry: ToolEntry) -> PreparedSchema:
    """Keyed by the whole entry, definition included: a changed tool is prepared anew."""
    from proxy.downstream.calls._validation import PreparedSchema

    return PreparedSchema(entry.input_schema)


async def check_call(arguments: Mapping[str, Any] | None, entry: ToolEntry) -> dict[str, Any]:
    """`check_arguments` against the tool's schema (as clients see it), with its prepared check; then what
    the tool's override fills in (`overrides.Preset`).

    Raises:
        InvalidArguments: the call must not be made (a hidden parameter given is refused first).
    """
    prepared = _prepared(entry)
    if entry.preset is not None:
        entry.preset.refuse_hidden(arguments or {}, prepared.schema)
    checked = await check_arguments(arguments, prepared)
    return checked if entry.preset is None else entry.preset.fill(checked)
