"""The official conformance suite is pinned once: 0.2.0-alpha.12, the first release with the 2026-07-28
requirement set and the client scenarios. The setup script, the runner and the recorded direct results must name
the same version, and an installed suite must be it (a 0.1.x suite lacks the current spec's scenarios)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PINNED = "0.2.0-alpha.12"


def _assigned(path: Path, pattern: str) -> str:
    found = re.search(pattern, path.read_text(), re.MULTILINE)
    assert found, f"{path} names no suite version"
    return found.group(1)


def test_every_place_names_the_one_pinned_suite() -> None:
    setup = _assigned(REPO / "scripts" / "conformance-setup.sh", r"^SUITE_VERSION=(\S+)$")
    runner = _assigned(REPO / "scripts" / "conformance.py", r'^SUITE_VERSION = "([^"]+)"$')
    recorded = json.loads((REPO / "tests" / "e2e" / "conformance-expected.json").read_text())["suite"]
    assert setup == runner == PINNED
    assert recorded == f"@modelcontextprotocol/conformance@{PINNED}"


def test_the_installed_suite_is_the_pinned_one() -> None:
    installed = REPO / ".conformance" / "node_modules" / "@modelcontextprotocol" / "conformance" / "package.json"
    if not installed.exists():
        pytest.skip("conformance suite not in .conformance/: run scripts/conformance-setup.sh")
    assert json.loads(installed.read_text())["version"] == PINNED
