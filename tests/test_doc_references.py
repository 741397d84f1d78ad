"""The docs name tests as the proof of their claims (docs/security.md's tables, docs/protocol-2026-07-28.md's
rows): every test a doc names must exist, or a claim silently loses its proof when a test is renamed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
NAMED = re.compile(r"::(test_\w+)")


def test_every_test_a_doc_names_exists() -> None:
    defined = {match for path in (ROOT / "tests").rglob("*.py")
               for match in re.findall(r"def (test_\w+)", path.read_text(encoding="utf-8"))}
    missing = [(doc.name, name) for doc in DOCS for name in NAMED.findall(doc.read_text(encoding="utf-8"))
               if name not in defined]
    assert missing == []
    assert len({name for doc in DOCS for name in NAMED.findall(doc.read_text(encoding="utf-8"))}) > 100
