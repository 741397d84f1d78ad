"""How `scripts/conformance.py` scores the suite's checks and compares two runs (pure functions)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

_PATH = Path(__file__).resolve().parent.parent / "scripts" / "conformance.py"
_SPEC = importlib.util.spec_from_file_location("conformance_script", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
conformance = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = conformance  # dataclasses look their module up while the script loads
_SPEC.loader.exec_module(conformance)


def check(status: str, ident: str = "c", error: str | None = None, **details: Any) -> dict[str, Any]:
    return {"id": ident, "status": status, "errorMessage": error, "details": details or None}


@pytest.mark.parametrize(("checks", "reasons"), [
    ([check("SUCCESS")], ()),
    ([check("SUCCESS"), check("WARNING", "w")], ()),
    ([check("INFO"), check("WARNING", "w", receivedToolResponse=True)], ()),
    ([check("SUCCESS"), check("FAILURE", "f", "No image content found")], ("f: No image content found",)),
    ([check("FAILURE", "f")], ("f: failed",)),
    ([check("SUCCESS", "e", result={"isError": True, "content": [{"text": "Unknown tool 'x'."}]})],
     ("e is SUCCESS but says 'unknown tool'",)),
    ([check("INFO", "i", data='{"error": {"message": "Method not found"}}')],
     ("i is INFO but says 'method not found'",)),
    ([check("INFO"), check("WARNING", "w")], ("no check succeeded",)),
    ([], ("no check succeeded",)),
    (None, ("no checks.json: unknown scenario, crash or timeout",)),
])
def test_score(checks: list[dict[str, Any]] | None, reasons: tuple[str, ...]) -> None:
    outcome = conformance.score("s", checks)
    assert outcome.reasons == reasons
    assert outcome.passed is (not reasons)


def test_score_lists_warnings_without_failing() -> None:
    outcome = conformance.score("s", [check("WARNING", "a"), check("SUCCESS"), check("WARNING", "b")])
    assert outcome.passed and outcome.warnings == ("a", "b")
    assert outcome.counts == {"success": 1, "failure": 0, "warning": 2}


def test_read_results_names_each_scenario_by_its_directory(tmp_path: Path) -> None:
    for name in ("server-server-initialize-2026-12-01T05-37-41-123Z",
                 "server-tools-call-error-2026-12-01T05-37-42-001Z"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "checks.json").write_text(json.dumps([check("SUCCESS", name)]))
    (tmp_path / "unrelated").mkdir()
    (tmp_path / "unrelated" / "checks.json").write_text("[]")
    assert sorted(conformance.read_results(tmp_path)) == ["server-initialize", "tools-call-error"]


def test_compare_names_each_scenario_whose_verdict_differs() -> None:
    direct = {"passed": ["ping", "prompts-list", "tools-list"], "failed": {}}
    proxied = {"passed": ["ping", "tools-list"], "failed": {"prompts-list": ["prompts-list: Method not found"]}}
    assert conformance.compare(direct, proxied, ("direct", "proxied")) == [
        "prompts-list: pass in direct, FAIL in proxied (prompts-list: Method not found)"]
    assert conformance.compare(direct, direct, ("a", "b")) == []
