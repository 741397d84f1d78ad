"""JSON Schema validation of hostile schemas: nothing fetched, no backtracking, never on the loop.

An upstream's `inputSchema` is untrusted (SPEC §8). Three ways it could hurt us, and the answer
to each:

- `$ref` to a URL: the registry resolves nothing remote, so such a `$ref` is unresolvable and the
  check fails open (the upstream is the final judge).
- `pattern` / `patternProperties` built for catastrophic backtracking: they run on RE2, which is
  linear in time; a pattern RE2 cannot compile (backreferences, lookaround) is skipped. Python's
  `re` holds the GIL while it backtracks, so a worker thread alone would not keep the loop alive.
- anything else slow (huge `uniqueItems`, deep `$ref` chains): validation runs in a worker
  thread with a deadline and fails open when it passes it; at most `MAX_RUNNING` such threads
  exist at once (a thread cannot be killed), beyond that validation is skipped.

Most calls are small, though: a schema without references and arguments of a few values. Their
validation runs on the loop (tens of microseconds, where the thread hop alone costs more), since
its cost is bounded by the sizes `_small` checks: with no `$ref` nothing is evaluated twice but
under `unevaluated*` (left to the thread too), so the work is at most schema nodes times argument
nodes, plus linear-time RE2 over bounded strings. Validator classes are built once per draft, and
a validator once per schema that is checked on the loop (`PreparedSchema`). Most tool schemas use
a handful of plain keywords (types, properties, required, string enums, bounds): for those a
compiled check accepts valid arguments first, in a fraction of jsonschema's time, and anything it
is unsure of goes to jsonschema, which gives the error.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anyio
import anyio.to_thread
import re2
from jsonschema import exceptions as schema_errors
from jsonschema import validators
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from referencing import Registry
from referencing.exceptions import NoSuchResource

logger = logging.getLogger(__name__)

__all__ = ["DEADLINE", "MAX_RUNNING", "PreparedSchema", "find_error"]

DEADLINE = 1.0  # seconds one validation may take before the call is let through unchecked
MAX_RUNNING = 4  # validation threads alive at once (stuck ones included)
_RE2_MAX_MEMORY = 8 << 20
# Validated on the loop within these bounds (each value, key and list counts as a node).
_SMALL_SCHEMA = (256, 8192)  # nodes, characters of strings
_SMALL_ARGUMENTS = (64, 8192)
# RE2 instructions of all a schema's patterns, if it is to be checked on the loop: a search costs up to the
# program's size times the text's length, and a pattern of ~1,000 instructions took ~30 ms over 8,192 characters.
_SMALL_PATTERNS = 512
_EXPENSIVE_KEYWORDS = frozenset({"$ref", "$dynamicRef", "$recursiveRef", "unevaluatedProperties", "unevaluatedItems"})
_SCALARS = frozenset({int, float, bool, type(None)})


def _refuse(uri: str) -> Any:
    raise NoSuchResource(ref=uri)


_NO_REMOTE = Registry(retrieve=_refuse)  # type: ignore[call-arg]


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any | None:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _RE2_MAX_MEMORY
    try:
        return re2.compile(pattern, options)
    except Exception:  # RE2 cannot run it (backreference, lookaround, too big): no check
        return None


def _search(pattern: Any, text: str) -> bool | None:
    """Whether `pattern` finds a match in `text`; None when RE2 cannot run the pattern."""
    compiled = _compiled(pattern) if isinstance(pattern, str) else None
    return None if compiled is None else compiled.search(text) is not None


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[schema_errors.ValidationError]:
    if validator.is_type(instance, "string") and _search(pattern, instance) is False:
        yield schema_errors.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object") or not isinstance(patterns, Mapping):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """As jsonschema's, with patterns on RE2; a key an unusable pattern might match is not extra."""
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties") or {}
    patterns = schema.get("patternProperties") or {}
    extras = [
        key for key in instance
        if key not in declared and not any(_search(p, key) is not False for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        listed = ", ".join(repr(key) for key in sorted(extras))
        yield schema_errors.ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


_SAFE_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


def _uses_python_regex(schema: Any) -> bool:
    """`unevaluatedProperties` next to `patternProperties` would run the patterns on Python's `re`."""
    found: set[str] = set()
    todo = [schema]
    while todo and len(found) < 2:
        node = todo.pop()
        if isinstance(node, Mapping):
            found.update(k for k in ("unevaluatedProperties", "patternProperties") if k in node)
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return len(found) == 2


def _program_size(node: dict[str, Any]) -> int:
    """RE2 instructions of a schema node's `pattern` and `patternProperties` (none for one RE2 cannot run)."""
    properties = node.get("patternProperties")
    patterns = [node.get("pattern"), *(properties if isinstance(properties, dict) else ())]
    return sum(compiled.programsize for p in patterns if isinstance(p, str) and (compiled := _compiled(p)) is not None)


def _small(value: Any, limits: tuple[int, int], *, schema: bool = False) -> bool:
    """Whether JSON `value` is within (nodes, string characters); a schema also has no expensive keyword
    and patterns of at most `_SMALL_PATTERNS` instructions in all."""
    nodes, chars = limits
    program = _SMALL_PATTERNS
    todo = [value]
    try:
        while todo:
            node = todo.pop()
            nodes -= 1
            kind = type(node)
            if kind is str:
                chars -= len(node)
            elif kind is dict:
                if schema and not _EXPENSIVE_KEYWORDS.isdisjoint(node):
                    return False
                if schema and ("pattern" in node or "patternProperties" in node):
                    program -= _program_size(node)
                    if program < 0:
                        return False
                chars -= sum(map(len, node))
                todo.extend(node.values())
            elif kind is list:
                todo.extend(node)
            elif kind not in _SCALARS:
                return False
            if nodes < 0 or chars < 0:
                return False
    except TypeError:  # a key that is not a string: not JSON, let the thread path judge it
        return False
    return True


@functools.cache
def _safe_validator(base: Any) -> Any:
    """The draft's validator class with our RE2 keywords: building one takes ~0.4 ms, so once per draft."""
    return validators.extend(base, _SAFE_KEYWORDS)


def _validator(schema: Mapping[str, Any]) -> Any:
    return _safe_validator(validators.validator_for(schema))(schema, registry=_NO_REMOTE)


def _best_error(validator: Any, arguments: dict[str, Any]) -> schema_errors.ValidationError | None:
    try:
        return schema_errors.best_match(validator.iter_errors(arguments))
    except Exception as exc:  # invalid schema, unresolvable $ref, recursion: the upstream decides
        logger.debug("schema not usable for validation (%s); passing the call through", type(exc).__name__)
        return None


def _usable_validator(schema: Mapping[str, Any]) -> Any | None:
    """The schema's validator, or None when the schema cannot be used (then the upstream decides)."""
    try:
        return _validator(schema)
    except Exception as exc:
        logger.debug("schema not usable for validation (%s); passing the call through", type(exc).__name__)
        return None


Check = Callable[[Any], bool]
# Keywords that assert nothing (jsonschema is given no format checker, so `format` is one of them).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
                          "writeOnly", "format", "$schema", "$id"})
_QUICK_KEYWORDS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "items", "enum",
                                  "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"}
_TYPES: dict[str, Check] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,  # 1.0 is an integer from draft 6 on only: left to jsonschema
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
}


def _quick(schema: Any) -> Check | None:
    """A check that says True only for an instance `schema` certainly accepts, in every draft; None
    when the schema uses more than the plain keywords it knows. False means "ask jsonschema", which
    then finds the error (or accepts what this check was unsure of)."""
    if schema is True or schema == {}:
        return lambda v: True
    if not isinstance(schema, dict) or not _QUICK_KEYWORDS.issuperset(schema):
        return None
    checks: list[Check] = []
    declared = schema.get("type")
    if declared is not None:
        names = [declared] if isinstance(declared, str) else declared
        if not isinstance(names, list) or not all(isinstance(n, str) and n in _TYPES for n in names):
            return None
        kinds = [_TYPES[n] for n in names]
        checks.append(lambda v: any(kind(v) for kind in kinds))
    if "enum" in schema:  # strings only: jsonschema's equality differs from Python's for 1 and True
        if not isinstance(schema["enum"], list):
            return None
        strings = frozenset(e for e in schema["enum"] if isinstance(e, str))
        checks.append(lambda v: type(v) is str and v in strings)
    for keyword, test in (("minimum", lambda v, n: v >= n), ("maximum", lambda v, n: v <= n)):
        if keyword in schema:
            bound = schema[keyword]
            if type(bound) not in (int, float):
                return None
            checks.append(lambda v, b=bound, t=test: type(v) not in (int, float) or t(v, b))
    for keyword, kind, test in (("minLength", str, lambda n, b: n >= b), ("maxLength", str, lambda n, b: n <= b),
                                ("minItems", list, lambda n, b: n >= b), ("maxItems", list, lambda n, b: n <= b)):
        if keyword in schema:
            bound = schema[keyword]
            if type(bound) is not int:
                return None
            checks.append(lambda v, b=bound, k=kind, t=test: type(v) is not k or t(len(v), b))
    if not {"properties", "required", "additionalProperties"}.isdisjoint(schema):
        members = _quick_members(schema)
        if members is None:
            return None
        checks.append(members)
    if "items" in schema:
        item = _quick(schema["items"])
        if item is None:
            return None
        checks.append(lambda v: type(v) is not list or all(item(x) for x in v))
    return lambda v: all(check(v) for check in checks)


def _quick_or_none(schema: Any) -> Check | None:
    try:
        return _quick(schema)
    except Exception:  # e.g. an unhashable `required` entry: leave the schema to jsonschema
        return None


def _quick_members(schema: dict[str, Any]) -> Check | None:
    """`properties`, `required` and `additionalProperties` of an object schema, as one check."""
    properties, required = schema.get("properties", {}), schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    each = {key: _quick(sub) for key, sub in properties.items()}
    rest = None if additional is False else _quick(additional)
    if any(check is None for check in each.values()) or (additional is not False and rest is None):
        return None
    keys = frozenset(required)

    def members(value: Any) -> bool:
        if type(value) is not dict:
            return True
        if not keys.issubset(value):
            return False
        for key, item in value.items():
            check = each.get(key, rest)
            if check is None or not check(item):
                return False
        return True

    return members


_UNBUILT = object()


class PreparedSchema:
    """An input schema with what each check of it needs worked out once, for a tool called again and
    again: whether it is small enough to check on the loop, and its validator (which costs more to
    build than a small check costs to run)."""

    __slots__ = ("_header_paths", "_python_regex", "_quick", "_validator", "on_loop", "schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self.on_loop = _small(schema, _SMALL_SCHEMA, schema=True)
        self._quick = _quick_or_none(schema) if self.on_loop else None
        self._validator: Any = _UNBUILT
        self._python_regex: bool | None = None  # worked out in the worker thread, for a schema checked there
        self._header_paths: tuple[tuple[str, ...], ...] | None = None

    @property
    def header_paths(self) -> tuple[tuple[str, ...], ...]:
        """The properties mirrored into `Mcp-Param-*` headers (`x-mcp-header`, SEP-2243), worked out once."""
        if self._header_paths is None:
            valid = find_invalid_x_mcp_header(self.schema) is None  # a tool with an invalid one is not listed
            self._header_paths = tuple(x_mcp_header_map(self.schema)) if valid else ()
        return self._header_paths

    def first_error(self, arguments: dict[str, Any]) -> schema_errors.ValidationError | None:
        """The most relevant validation error, or None when valid or when the schema cannot be used
        (a small schema has no `unevaluatedProperties`, so its patterns run on RE2). The quick check of a
        plain schema accepts first; the validator is built on first use, once even when unusable."""
        if self._quick is not None and self._quick(arguments):
            return None
        if self._validator is _UNBUILT:
            self._validator = _usable_validator(self.schema)
        return None if self._validator is None else _best_error(self._validator, arguments)

    def first_error_in_thread(self, arguments: dict[str, Any]) -> schema_errors.ValidationError | None:
        """`first_error` for a schema too large for the loop: None when its patterns would run on Python's
        `re` (`_uses_python_regex`, worked out once, like the validator, not per call)."""
        if self._python_regex is None:
            self._python_regex = _uses_python_regex(self.schema)
        return None if self._python_regex else self.first_error(arguments)


class _Running:
    """Validation threads alive now, stuck ones included: a slot is freed when a thread ends, or
    when a validation gives up before its thread ever started (so it never will)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def enter(self) -> bool:
        with self._lock:
            if self.count >= MAX_RUNNING:
                return False
            self.count += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.count -= 1


_running = _Running()


class _Ticket:
    """One validation's slot; `start` and `abandon` race, and exactly one side frees the slot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "pending"

    def start(self) -> bool:
        with self._lock:
            if self._state == "abandoned":
                return False
            self._state = "running"
            return True

    def abandon(self) -> None:
        with self._lock:
            if self._state == "pending":
                self._state = "abandoned"
                _running.leave()


def _validate_in_thread(ticket: _Ticket, arguments: dict[str, Any], prepared: PreparedSchema) -> Any:
    if not ticket.start():
        return None
    try:
        return prepared.first_error_in_thread(arguments)
    finally:
        _running.leave()


async def find_error(
    arguments: dict[str, Any], prepared: PreparedSchema, *, deadline: float = DEADLINE
) -> schema_errors.ValidationError | None:
    """Validate within `deadline`, off the event loop unless small; None means valid, or could not be checked."""
    if prepared.on_loop and _small(arguments, _SMALL_ARGUMENTS):
        return prepared.first_error(arguments)
    if not _running.enter():
        logger.warning("%d argument validations are still running; letting this call through unchecked",
                       MAX_RUNNING)
        return None
    ticket = _Ticket()
    try:
        with anyio.move_on_after(deadline):
            return await anyio.to_thread.run_sync(
                _validate_in_thread, ticket, arguments, prepared, abandon_on_cancel=True
            )
    finally:
        ticket.abandon()
    logger.warning("argument validation took over %g s; letting the call through unchecked", deadline)
    return None
