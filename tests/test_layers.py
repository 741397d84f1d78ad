"""Architecture: `proxy/` is a stack of layers that import only downward (../shared/STYLE.md "Layers"), and each
wing is a stack of rooms that talk through their faces.

`LAYERS` is the one statement of the order; the layout table of docs/architecture.md must list the same entries
in the same order. `ROOMS` orders each wing's rooms the same way: a room imports only lower rooms of its wing,
and only their faces (`proxy.<wing>.<room>`); the wing's hall (its top-level modules) imports rooms' faces too.
Only `KNOWS_THE_FLEET` imports `proxy.upstream`. Sources are parsed with `ast`, nothing is imported; imports
under `if TYPE_CHECKING:` are annotations only and exempt.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "proxy"

# Lowest first: config → shared state → upstreams → registry/toolsets → surface → views → downstream → ops → console
# → app → CLI.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "names", "text"),
    ("protocol",),
    ("config",),
    ("replicated",),
    ("upstream",),
    ("registry", "overrides", "toolsets", "catalogs"),
    ("listing", "search", "surface"),
    ("views",),
    ("downstream",),
    ("ops",),
    ("console",),
    ("app",),
    ("cli", "__main__"),
)
LAYER_OF = {entry: depth for depth, entries in enumerate(LAYERS) for entry in entries}
ROOMS: dict[str, tuple[str, ...]] = {
    "upstream": ("connection", "integrity", "oauth", "fleet"),
    "downstream": ("session", "http", "rounds", "lists", "calls"),
}
KNOWS_THE_FLEET = ("ops", "app", "cli")
# Pure code: data to data, no network, processes or event loop (STYLE.md "Pure code").
PURE = ("names.py", "text.py", "overrides.py", "toolsets.py", "listing.py", "surface.py", "config/_models.py",
        "config/_loading.py", "config/_importer.py", "search/_index.py", "search/_clauses.py", "search/_postings.py",
        "search/_stemming.py", "search/_synonyms.py", "downstream/calls/_arguments.py")
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


def room_of(path: Path) -> tuple[str, str | None] | None:
    """(wing, room) of a source in a wing (room None: the wing's hall), else None."""
    parts = path.relative_to(PACKAGE_DIR).parts
    if parts[0] not in ROOMS:
        return None
    return parts[0], parts[1] if len(parts) > 2 and parts[1] in ROOMS[parts[0]] else None


def test_every_room_of_a_wing_is_ordered() -> None:
    for wing, rooms in ROOMS.items():
        found = {p.name for p in (PACKAGE_DIR / wing).iterdir() if p.is_dir() and (p / "__init__.py").exists()}
        assert found == set(rooms), f"add to or remove from ROOMS[{wing!r}]: {found ^ set(rooms)}"


@pytest.mark.parametrize("path", [p for p in sources() if room_of(p) is not None],
                         ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_rooms_talk_through_their_faces_and_import_only_lower_rooms(path: Path) -> None:
    wing, here = room_of(path)  # type: ignore[misc]
    rooms = ROOMS[wing]
    violations = []
    for line, target in imports(path):
        parts = target.split(".")
        if parts[:2] != ["proxy", wing] or len(parts) < 3:
            continue
        other = parts[2] if parts[2] in rooms else None
        if other is None:  # the hall, or the wing's face
            if here is not None:
                violations.append(f"line {line}: room {here} imports {target}, above it in its wing")
            continue
        if other == here:
            if len(parts) > 3 and not parts[3].startswith("_"):
                violations.append(f"line {line}: {target}: a room's own modules import each other, not its face")
            continue
        if here is not None and rooms.index(other) > rooms.index(here):
            violations.append(f"line {line}: room {here} imports room {other}, a higher one")
        if len(parts) > 4 or parts[3].startswith("_"):
            violations.append(f"line {line}: {target} is private to room {other}: import its face")
    assert not violations


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_only_app_cli_and_ops_know_the_fleet(path: Path) -> None:
    here = entry_of(path)
    bad = [f"line {line}: {target}" for line, target in imports(path)
           if target.split(".")[:2] == ["proxy", "upstream"] and here not in (*KNOWS_THE_FLEET, "upstream")]
    assert not bad


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
    private_attributes = re.findall(r"(?<![.\w])(?:session|client|ctx|request|connection|server)\._[a-z]\w*", text)
    assert not private_imports and not private_attributes, (private_imports, private_attributes)


def test_the_documented_layout_lists_the_layers_in_order() -> None:
    readme = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [re.findall(r"`proxy/(\w+)", line) for line in section.splitlines() if line.startswith("| ")]
    assert [tuple(row) for row in rows if row] == [entries for entries in LAYERS if entries != ("cli", "__main__")] \
        + [("cli",)]
