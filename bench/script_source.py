"""The tools a JavaScript or TypeScript MCP server defines, read from its source without running it.

A tolerant scanner, not a parser: it reads literals (strings, numbers, objects, arrays, `a.b(c)` chains) and
skips whatever else it meets up to the next `,` or closing bracket. It knows the forms MCP servers use:
`server.tool("name", "description", {zod shape})`, tool objects `{name, description, inputSchema}` (a ListTools
handler's array), and a file or class binding `name`, `description` and `inputSchema`/`SCHEMA`. Zod schemas are
turned into JSON Schema (types, enums, descriptions, required).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"""(?P<skip>\s+|//[^\n]*|/\*.*?\*/)
    |(?P<str>'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|`(?:\\.|\$\{[^}]*\}|[^`\\])*`)
    |(?P<num>\d+(?:\.\d+)?)
    |(?P<id>[A-Za-z_$][\w$]*)
    |(?P<op>=>|\.\.\.|[=!]==?|&&|\|\||\S)""", re.S | re.X)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
_CLOSERS = {")", "]", "}"}
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_MODIFIERS = {"const", "let", "var", "readonly", "public", "private", "protected", "static"}


@dataclass
class Ref:
    """A name the scanner did not evaluate (`FindParksSchema`, `this.search.name`)."""
    path: str


@dataclass
class Chain:
    """`root.a(x).b(y)`: the root name and each called step with its arguments."""
    root: str
    calls: list[tuple[str, list]] = field(default_factory=list)


def _string(text: str) -> str:
    body = re.sub(r"\$\{[^}]*\}", "", text[1:-1]) if text[0] == "`" else text[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[1]), body, flags=re.S)


def tokens(source: str) -> list[tuple[str, str]]:
    return [(m.lastgroup, m[0]) for m in _TOKEN.finditer(source) if m.lastgroup != "skip"]


class _Scanner:
    def __init__(self, toks: list[tuple[str, str]]) -> None:
        self.toks = toks

    def text(self, i: int) -> str:
        return self.toks[i][1] if i < len(self.toks) else ""

    def skip(self, i: int) -> int:
        """Past one expression: to the next `,`, `;` or unmatched closer at depth 0."""
        depth = 0
        while i < len(self.toks):
            t = self.text(i)
            if depth == 0 and (t in _CLOSERS or t in {",", ";"}):
                return i
            depth += (t in _OPENERS) - (t in _CLOSERS)
            i += 1
        return i

    def value(self, i: int) -> tuple[object, int]:
        """One expression at `i`: its value (or None) and the index after it."""
        result, i = self.primary(i)
        while self.text(i) == "+":
            right, i = self.primary(i + 1)
            if isinstance(result, str) and isinstance(right, str):
                result += right
        if self.text(i) not in _CLOSERS | {",", ";", ""}:
            i = self.skip(i)
        return result, i

    def primary(self, i: int) -> tuple[object, int]:
        kind, t = self.toks[i] if i < len(self.toks) else ("", "")
        if t in {"async", "new", "await"}:
            return self.primary(i + 1)
        if kind == "str":
            return _string(t), i + 1
        if kind == "num":
            return float(t), i + 1
        if t == "{":
            return self.object(i + 1)
        if t == "[":
            return self.items(i + 1, "]")
        if kind == "id":
            return self.chain(i)
        return None, self.skip(i)

    def items(self, i: int, closer: str) -> tuple[list, int]:
        out = []
        while i < len(self.toks) and self.text(i) != closer:
            item, i = self.value(i)
            out.append(item)
            if self.text(i) in {",", ";"}:
                i += 1
            elif self.text(i) != closer:
                i += 1  # a stray closer: step over it rather than loop
        return out, i + 1

    def object(self, i: int) -> tuple[dict, int]:
        out: dict[str, object] = {}
        while i < len(self.toks) and self.text(i) != "}":
            kind, key = self.toks[i]
            if kind in {"id", "str", "num"} and self.text(i + 1) == ":":
                out[_string(key) if kind == "str" else key], i = self.value(i + 2)
            elif kind == "id" and self.text(i + 1) in {",", "}"}:
                out[key], i = Ref(key), i + 1
            else:
                i = self.skip(i + 1)
            if self.text(i) == ",":
                i += 1
        return out, i + 1

    def chain(self, i: int) -> tuple[object, int]:
        names = [self.text(i)]
        i += 1
        while self.text(i) == "." and self.toks[i + 1][0] == "id":
            names.append(self.text(i + 1))
            i += 2
        if names == ["true"] or names == ["false"]:
            return names == ["true"], i
        if names[0] in {"null", "undefined"} or self.text(i) == "=>":
            return None, self.skip(i)
        if self.text(i) != "(":
            return Ref(".".join(names)), i
        chain = Chain(".".join(names[:-1]) or names[0])
        step = names[-1]
        while self.text(i) == "(":
            args, i = self.items(i + 1, ")")
            chain.calls.append((step, args))
            if self.text(i) != "." or self.toks[i + 1][0] != "id":
                break
            step, i = self.text(i + 1), i + 2
        return chain, i


def zod_schema(value: object) -> dict:
    """A zod type (a `z.` chain) or raw shape (`{key: z...}`), or a JSON Schema literal, as JSON Schema."""
    if isinstance(value, dict):
        if isinstance(value.get("type"), str):
            return _json(value)
        props = {k: zod_schema(v) for k, v in value.items()}
        required = [k for k, v in value.items() if not _optional(v)]
        return {"type": "object", "properties": props} | ({"required": required} if required else {})
    if not isinstance(value, Chain) or not value.calls:
        return {}
    (kind, args), *rest = value.calls
    schema: dict = {}
    if kind == "object" and args:
        schema = zod_schema(args[0])
    elif kind == "enum" and args and isinstance(args[0], list):
        schema = {"type": "string", "enum": [a for a in args[0] if isinstance(a, str)]}
    elif kind == "array":
        schema = {"type": "array"} | ({"items": zod_schema(args[0])} if args else {})
    elif kind in {"string", "number", "boolean"}:
        schema = {"type": kind}
    elif kind == "record":
        schema = {"type": "object"}
    for step, step_args in rest:
        if step == "describe" and step_args and isinstance(step_args[0], str):
            schema["description"] = step_args[0]
        elif step == "int":
            schema["type"] = "integer"
    return schema


def _optional(value: object) -> bool:
    return isinstance(value, Chain) and any(step in {"optional", "default", "nullish"} for step, _ in value.calls)


def _json(value: object) -> object:
    """A JSON Schema literal without the parts the scanner could not evaluate."""
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items() if isinstance(v, (str, float, bool, dict, list))}
    if isinstance(value, list):
        return [_json(v) for v in value if isinstance(v, (str, float, bool, dict, list))]
    return value


def bindings(toks: list[tuple[str, str]]) -> dict[str, object]:
    """`const X = ...`, `readonly x: T = ...`: every declared name and its value."""
    scanner, out = _Scanner(toks), {}
    for i, (kind, name) in enumerate(toks):
        if kind != "id" or i == 0 or toks[i - 1][1] not in _MODIFIERS:
            continue
        at = i + 1
        if scanner.text(at) == ":" and scanner.text(at + 2) == "=":
            at += 2  # a type annotation of one word
        if scanner.text(at) == "=":
            out[name], _ = scanner.value(at + 1)
    return out


def script_tools(sources: list[str]) -> list[dict]:
    """The tools defined across one server's source files, in the order first met."""
    files = [tokens(source) for source in sources]
    known: dict[str, object] = {}
    for toks in files:
        known |= bindings(toks)
    found: dict[str, dict] = {}

    def add(name: object, description: object, schema: object) -> None:
        if isinstance(schema, Ref):
            schema = known.get(schema.path.removesuffix(".shape"))
        if isinstance(schema, Chain) and schema.calls and schema.calls[0][0] == "zodToJsonSchema":
            args = schema.calls[0][1]
            schema = known.get(args[0].path) if args and isinstance(args[0], Ref) else None
        if isinstance(name, str) and isinstance(description, str):
            found.setdefault(name, {"name": name, "description": description,
                                    "inputSchema": zod_schema(schema) or {"type": "object", "properties": {}}})

    for toks in files:
        scanner = _Scanner(toks)
        for i in range(len(toks) - 2):
            if toks[i][1] == "." and toks[i + 1][1] in {"tool", "registerTool"} and toks[i + 2][1] == "(":
                args, _ = scanner.items(i + 3, ")")
                schema = next((a for a in args[2:] if isinstance(a, (dict, Ref, Chain))), None)
                if len(args) > 1 and isinstance(args[1], dict):  # registerTool(name, {description, inputSchema})
                    add(args[0], args[1].get("description"), args[1].get("inputSchema"))
                elif len(args) > 1:
                    add(args[0], args[1], schema)
            elif toks[i][1] == "{" and toks[i + 1][1] == "name" and toks[i + 2][1] == ":":
                tool, _ = scanner.object(i + 1)
                if "inputSchema" in tool:
                    add(tool.get("name"), tool.get("description"), tool["inputSchema"])
        own = bindings(toks)
        name, description = own.get("name", own.get("NAME")), own.get("description", own.get("DESCRIPTION"))
        if isinstance(name, str) and isinstance(description, str):
            add(name, description, own.get("inputSchema", own.get("SCHEMA", own.get("schema"))))
    return list(found.values())
