"""The tools a Python MCP server defines, read from its source with `ast` without running it.

Two forms: FastMCP's decorated functions (`@mcp.tool()` at any depth: its name, docstring and typed parameters,
`Annotated[T, Field(description=...)]` included) and the low-level server's `Tool(name=..., description=...,
inputSchema=...)` literals, whose names may be module constants or `Enum.MEMBER.value`.
"""

from __future__ import annotations

import ast

_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array", "List": "array",
          "tuple": "array", "Tuple": "array", "set": "array", "dict": "object", "Dict": "object"}
_IMPLICIT = {"self", "cls", "ctx", "context"}
_MISSING = object()


class _Module:
    def __init__(self, tree: ast.Module) -> None:
        self.names: dict[str, ast.expr] = {}  # module-level `X = ...` and `Class.X = ...`
        for node in tree.body:
            for stmt in node.body if isinstance(node, ast.ClassDef) else [node]:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    prefix = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
                    self.names[prefix + stmt.targets[0].id] = stmt.value

    def literal(self, node: ast.expr | None) -> object:
        """A constant expression's value, f-strings without their fields; `_MISSING` where it is not one."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        if isinstance(node, (ast.List, ast.Tuple)):
            return [v for v in map(self.literal, node.elts) if v is not _MISSING]
        if isinstance(node, ast.Dict):
            pairs = ((self.literal(k), self.literal(v)) for k, v in zip(node.keys, node.values, strict=True))
            return {k: v for k, v in pairs if isinstance(k, str) and v is not _MISSING}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.literal(node.left), self.literal(node.right)
            return left + right if isinstance(left, str) and isinstance(right, str) else _MISSING
        if isinstance(node, ast.Name) and node.id in self.names:
            return self.literal(self.names[node.id])
        if isinstance(node, ast.Attribute) and node.attr == "value" and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name):  # Enum.MEMBER.value
            return self.literal(self.names.get(f"{node.value.value.id}.{node.value.attr}"))
        return _MISSING

    def schema(self, annotation: ast.expr | None) -> dict:
        """JSON Schema for a parameter annotation (its type, enum and description where they are plain)."""
        if isinstance(annotation, ast.Subscript):
            base = _name(annotation.value)
            args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
            if base == "Annotated":
                schema = self.schema(args[0])
                for meta in args[1:]:
                    text = self.literal(meta)
                    if isinstance(meta, ast.Call):
                        text = self.literal(_keyword(meta, "description"))
                    if isinstance(text, str):
                        schema["description"] = text
                return schema
            if base == "Literal":
                values = [self.literal(a) for a in args]
                return {"enum": values} | ({"type": "string"} if all(isinstance(v, str) for v in values) else {})
            if base in {"Optional", "Union"}:
                return self.schema(next((a for a in args if _name(a) != "None"), None))
            return {"type": _TYPES[base]} if base in _TYPES else {}
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):  # X | None
            return self.schema(annotation.right if _name(annotation.left) == "None" else annotation.left)
        if isinstance(annotation, ast.Name) and annotation.id in self.names:
            return self.schema(self.names[annotation.id])
        name = _name(annotation)
        return {"type": _TYPES[name]} if name in _TYPES else {}

    def tool(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, decorator: ast.Call) -> dict:
        """A decorated function as a tools/list entry, as FastMCP would list it."""
        args = fn.args
        positional = args.posonlyargs + args.args
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        properties, required = {}, []
        for arg, default in [*zip(positional, defaults, strict=True), *zip(args.kwonlyargs, args.kw_defaults,
                                                                           strict=True)]:
            if arg.arg in _IMPLICIT or "Context" in ast.unparse(arg.annotation or ast.Constant(None)):
                continue
            schema = self.schema(arg.annotation)
            if isinstance(default, ast.Call) and _name(default.func) == "Field":
                text = self.literal(_keyword(default, "description"))
                schema |= {"description": text} if isinstance(text, str) else {}
                default = _keyword(default, "default") or (default.args[0] if default.args else None)
            properties[arg.arg] = schema
            if default is None:
                required.append(arg.arg)
        name = self.literal(_keyword(decorator, "name"))
        description = self.literal(_keyword(decorator, "description"))
        return {"name": name if isinstance(name, str) else fn.name,
                "description": description if isinstance(description, str) else ast.get_docstring(fn) or "",
                "inputSchema": {"type": "object", "properties": properties} | ({"required": required} if required
                                                                                else {})}


def _name(node: ast.expr | None) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return "None" if isinstance(node, ast.Constant) and node.value is None else ""


def _keyword(call: ast.Call, key: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == key), None)


def python_tools(sources: list[str]) -> list[dict]:
    """The tools defined across one server's source files, in source order."""
    found: dict[str, dict] = {}
    for source in sources:
        tree = ast.parse(source)
        module = _Module(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    if isinstance(decorator, ast.Call) and _name(decorator.func) == "tool":
                        tool = module.tool(node, decorator)
                        found.setdefault(tool["name"], tool)
            elif isinstance(node, ast.Call) and _name(node.func) == "Tool":
                name = module.literal(_keyword(node, "name"))
                description = module.literal(_keyword(node, "description"))
                schema = module.literal(_keyword(node, "inputSchema"))
                if isinstance(name, str):
                    found.setdefault(name, {"name": name, "description": description if isinstance(description, str)
                                            else "", "inputSchema": schema if isinstance(schema, dict) else {}})
    return sorted(found.values(), key=lambda t: t["name"])
