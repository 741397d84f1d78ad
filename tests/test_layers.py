"""Architecture: modules import only downward, and pure modules import no I/O (STYLE.md "Layers").

Parsed with `ast`, nothing is imported. Imports guarded by `if TYPE_CHECKING:` are annotations only
and are exempt. A module missing from the layer table fails `test_every_module_has_a_layer`: give a
new module its layer here, once.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "proxy"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / PACKAGE

# Lowest first. A module may import its own layer and the layers below it, never above.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({
        "__init__", "errors", "names", "config", "yaml_lines", "backoff", "importer", "stemming",
    })),
    ("upstreams", frozenset({"upstream", "upstream_errors", "spawn"})),
    # The fleet supervises connections and keeps their tools registered: it lives with the registry.
    ("registry", frozenset({"registry", "toolsets", "fleet"})),
    # `semantic` reads model weights and its embedding cache from disk: surface, but not pure.
    ("surface", frozenset({"listing", "search", "postings", "semantic", "surface", "arguments", "catalog"})),
    ("serving", frozenset({"bridge", "server", "http", "gateway"})),
    ("cli", frozenset({"cli", "__main__"})),
)
LAYER_OF = {module: index for index, (_, modules) in enumerate(LAYERS) for module in modules}

# Pure code: synchronous, data to data, no I/O (STYLE.md "Pure code").
PURE = frozenset({
    "config", "names", "errors", "toolsets", "listing", "search", "postings", "stemming", "surface", "arguments",
    "backoff", "importer",
})
IO_MODULES = frozenset({
    "upstream", "spawn", "fleet", "semantic", "server", "bridge", "http", "cli", "gateway", "__main__",
})
IO_LIBRARIES = frozenset({
    "socket", "ssl", "subprocess", "asyncio", "anyio", "selectors", "http.client", "urllib.request",
    "httpx", "httpx2", "uvicorn", "starlette", "mcp.client", "mcp.server",
})


@dataclass(frozen=True)
class Import:
    target: str  # dotted module name, absolute
    line: int
    type_checking: bool


def _is_type_checking_guard(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def collect_imports(source: str, module: str, is_package: bool = False) -> list[Import]:
    """Every import in `source` (module bodies, functions, try blocks alike), made absolute.

    `from pkg import name` yields `pkg.name` when `pkg` is this package, so that
    `from proxy import upstream` counts as importing `proxy.upstream`.
    """
    tree = ast.parse(source)
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking_guard(node):
            for statement in node.body:
                guarded.update(id(child) for child in ast.walk(statement))
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, node.lineno, id(node) in guarded) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package_parts[: len(package_parts) - node.level + 1]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            if base == PACKAGE or base.startswith(PACKAGE + ".") or node.module is None:
                for alias in node.names:
                    target = f"{base}.{alias.name}".lstrip(".")
                    found.append(Import(target, node.lineno, id(node) in guarded))
            else:
                found.append(Import(base, node.lineno, id(node) in guarded))
    return found


def first_party(target: str) -> str | None:
    """`proxy.registry.X` → `registry`; `proxy.__version__` → `__init__`; others → None."""
    if target == PACKAGE:
        return "__init__"
    if not target.startswith(PACKAGE + "."):
        return None
    name = target.split(".")[1]
    if (PACKAGE_DIR / f"{name}.py").exists() or (PACKAGE_DIR / name).is_dir() or name in LAYER_OF:
        return name
    return "__init__"  # an attribute of the package itself, like __version__


def existing_modules() -> list[str]:
    modules = [path.stem for path in PACKAGE_DIR.glob("*.py")]
    modules += [path.name for path in PACKAGE_DIR.iterdir() if (path / "__init__.py").is_file()]
    return sorted(modules)


def module_sources(module: str) -> list[tuple[str, str, bool]]:
    """(dotted name, source, is_package) for a top-level module or every file of a subpackage."""
    path = PACKAGE_DIR / f"{module}.py"
    if path.is_file():
        dotted = PACKAGE if module == "__init__" else f"{PACKAGE}.{module}"
        return [(dotted, path.read_text(encoding="utf-8"), module == "__init__")]
    sources = []
    for file in sorted((PACKAGE_DIR / module).rglob("*.py")):
        parts = [PACKAGE, *file.relative_to(PACKAGE_DIR).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        dotted = ".".join(parts[:-1] if is_package else parts)
        sources.append((dotted, file.read_text(encoding="utf-8"), is_package))
    return sources


def runtime_imports(module: str) -> list[Import]:
    if not (PACKAGE_DIR / f"{module}.py").is_file() and not (PACKAGE_DIR / module).is_dir():
        pytest.skip(f"{PACKAGE}/{module} does not exist yet")
    return [
        found
        for dotted, source, is_package in module_sources(module)
        for found in collect_imports(source, dotted, is_package)
        if not found.type_checking
    ]


# --- the checks -------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    missing = [module for module in existing_modules() if module not in LAYER_OF]
    assert not missing, f"give these modules a layer in tests/test_layers.py LAYERS: {missing}"


def test_layer_table_lists_each_module_once() -> None:
    listed = [module for _, modules in LAYERS for module in modules]
    assert len(listed) == len(set(listed))
    assert set(LAYER_OF) >= PURE | IO_MODULES
    assert not PURE & IO_MODULES


@pytest.mark.parametrize("module", sorted(LAYER_OF))
def test_no_module_imports_a_higher_layer(module: str) -> None:
    violations = []
    for found in runtime_imports(module):
        target = first_party(found.target)
        if target is None or target == module:
            continue
        if target not in LAYER_OF:
            violations.append(f"line {found.line}: {found.target} has no layer")
        elif LAYER_OF[target] > LAYER_OF[module]:
            violations.append(
                f"line {found.line}: {module} ({LAYERS[LAYER_OF[module]][0]}) imports {target} "
                f"({LAYERS[LAYER_OF[target]][0]})"
            )
    assert not violations, violations


@pytest.mark.parametrize("module", sorted(PURE))
def test_pure_modules_import_no_io(module: str) -> None:
    violations = []
    for found in runtime_imports(module):
        target = first_party(found.target)
        if target in IO_MODULES:
            violations.append(f"line {found.line}: {found.target}")
        if target is None and any(
            found.target == library or found.target.startswith(library + ".") for library in IO_LIBRARIES
        ):
            violations.append(f"line {found.line}: {found.target}")
    assert not violations, violations


def test_first_party_imports_have_no_cycles() -> None:
    graph = {
        module: {
            target
            for found in runtime_imports(module)
            if (target := first_party(found.target)) is not None and target != module
        }
        for module in existing_modules()
    }
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = "active"
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "active":
                cycle = [*path[path.index(target):], target]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)


# --- the collector itself ---------------------------------------------------------------------


def targets(source: str, module: str = "proxy.listing", is_package: bool = False) -> list[tuple[str, bool]]:
    return [(found.target, found.type_checking) for found in collect_imports(source, module, is_package)]


def test_collector_sees_every_import_form() -> None:
    source = """
import socket
import os.path as p
from proxy.registry import Registry
from proxy import upstream, __version__
from . import names
from .config import Config
from .. import elsewhere
import proxy.fleet

def later():
    import subprocess
    from proxy.cli import main

try:
    import uvicorn
except ImportError:
    pass

if TYPE_CHECKING:
    from proxy.server import Server
if typing.TYPE_CHECKING:
    import httpx2
"""
    assert sorted(targets(source)) == sorted([
        ("socket", False),
        ("os.path", False),
        ("proxy.registry.Registry", False),
        ("proxy.upstream", False),
        ("proxy.__version__", False),
        ("proxy.names", False),
        ("proxy.config.Config", False),
        ("elsewhere", False),
        ("proxy.fleet", False),
        ("subprocess", False),
        ("proxy.cli.main", False),
        ("uvicorn", False),
        ("proxy.server.Server", True),
        ("httpx2", True),
    ])


def test_collector_resolves_relative_imports_inside_a_subpackage() -> None:
    assert targets("from . import x\nfrom .. import y\n", "proxy.sub.mod") == [
        ("proxy.sub.x", False),
        ("proxy.y", False),
    ]
    assert targets("from . import x\n", "proxy.sub", is_package=True) == [("proxy.sub.x", False)]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("proxy", "__init__"),
        ("proxy.__version__", "__init__"),
        ("proxy.registry", "registry"),
        ("proxy.registry.Registry", "registry"),
        ("proxy.cli.main", "cli"),
        ("proxyish", None),
        ("mcp.types", None),
    ],
)
def test_first_party(target: str, expected: str | None) -> None:
    assert first_party(target) == expected
