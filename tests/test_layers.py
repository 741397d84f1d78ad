"""Architecture: `proxy/` is a stack of layers that import only downward (STYLE.md "Layers").

`LAYERS` is the one statement of the order; the layout table of docs/architecture.md must list the same entries
in the same order. Sources are parsed with `ast`, nothing is imported; imports under
`if TYPE_CHECKING:` are annotations only and exempt.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "proxy"

# Lowest first: config → shared state → upstreams → registry/toolsets → surface → views → downstream → app → CLI.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "names", "text"),
    ("config",),
    ("shared",),
    ("upstream",),
    ("registry", "toolsets", "catalogs"),
    ("listing", "search", "surface"),
    ("views",),
    ("downstream",),
    ("ops",),
    ("app",),
    ("cli", "__main__"),
)
LAYER_OF = {entry: depth for depth, entries in enumerate(LAYERS) for entry in entries}
# Pure code: data to data, no network, processes or event loop (STYLE.md "Pure code").
PURE = ("names.py", "text.py", "toolsets.py", "listing.py", "surface.py", "config/_models.py", "config/_loading.py",
        "config/_importer.py", "search/_index.py", "search/_postings.py", "search/_stemming.py", "search/_synonyms.py",
        "downstream/_arguments.py")
IO_LIBRARIES = ("socket", "ssl", "subprocess", "asyncio", "anyio", "httpx2", "uvicorn", "starlette", "mcp.client",
                "mcp.server")


def entry_of(path: Path) -> str:
    """The layer entry a source file belongs to: its top-level module or subpackage."""
    return path.relative_to(PACKAGE_DIR).parts[0].removesuffix(".py")


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE_DIR.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE_DIR)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute dotted target) of every runtime import in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    guards = [node for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)]
    guarded = {id(n) for node in guards for statement in node.body for n in ast.walk(statement)}
    package = list(path.relative_to(ROOT).with_suffix("").parts)
    package = package if path.name == "__init__.py" else package[:-1]
    found = []
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], *[node.module or ""]]) if node.level \
                else node.module or ""
            found += [(node.lineno, f"{base.rstrip('.')}.{alias.name}") for alias in node.names]
    return found


def test_every_entry_of_the_package_has_a_layer() -> None:
    entries = {entry_of(p) for p in PACKAGE_DIR.rglob("*.py")} - {"__init__"}
    assert entries == set(LAYER_OF), f"add to or remove from LAYERS: {entries ^ set(LAYER_OF)}"


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_imports_go_down_and_private_modules_stay_in_their_package(path: Path) -> None:
    here = entry_of(path)
    violations = []
    for line, target in imports(path):
        parts = target.split(".")
        if parts[0] != "proxy" or len(parts) < 2 or parts[1] not in LAYER_OF or parts[1] == here:
            continue
        if LAYER_OF[parts[1]] > LAYER_OF[here]:
            violations.append(f"line {line}: {here} imports {parts[1]}, a higher layer")
        if any(part.startswith("_") and not part.startswith("__") for part in parts[2:3]):
            violations.append(f"line {line}: {target} is private to proxy/{parts[1]}/")
    assert not violations


@pytest.mark.parametrize("entry", PURE)
def test_pure_code_does_no_io(entry: str) -> None:
    bad = [f"line {line}: {target}" for line, target in imports(PACKAGE_DIR / entry)
           if any(target == lib or target.startswith(lib + ".") for lib in IO_LIBRARIES)
           or target.split(".")[1:2] in (["upstream"], ["app"], ["cli"])]
    assert not bad


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_no_private_sdk_names(path: Path) -> None:
    """Private SDK names break on any patch release: `mcp._x`, `from mcp.x import _y`, `obj._attr` on SDK objects."""
    text = path.read_text(encoding="utf-8")
    private_imports = [t for _, t in imports(path) if t.startswith("mcp") and re.search(r"\._[a-z]", t)]
    private_attributes = re.findall(r"\b(?:session|client|ctx|request|connection|server)\._[a-z]\w*", text)
    assert not private_imports and not private_attributes, (private_imports, private_attributes)


def test_the_documented_layout_lists_the_layers_in_order() -> None:
    readme = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [re.findall(r"`proxy/(\w+)", line) for line in section.splitlines() if line.startswith("| ")]
    assert [tuple(row) for row in rows if row] == [entries for entries in LAYERS if entries != ("cli", "__main__")] \
        + [("cli",)]
