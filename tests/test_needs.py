"""Tests that start nginx or redis-server skip, naming the fix, where those programs are not installed.

The README's test command must pass on a fresh machine; `.ci/run` installs both and runs them.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import missing_programs

TESTS = Path(__file__).resolve().parent
STARTERS = {"redis_server": "redis-server", "nginx": "nginx"}  # tests/servers/cluster.py's context managers


def _guards(node: ast.AST) -> set[str]:
    """Programs a function or module declares it needs: `needs(...)` marks, `missing_programs(...)` checks."""
    found: set[str] = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) in ("needs", "missing_programs"):
            found.update(arg.value for arg in call.args if isinstance(arg, ast.Constant))
    return found


def _unguarded(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = set().union(*(_guards(n) for n in tree.body if isinstance(n, ast.Assign)
                           and any(getattr(t, "id", None) == "pytestmark" for t in n.targets)))
    problems = []
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
        started = {STARTERS[c.func.id] for c in ast.walk(function) if isinstance(c, ast.Call)
                   and isinstance(c.func, ast.Name) and c.func.id in STARTERS}
        declared = module | set().union(*(_guards(d) for d in function.decorator_list)) | _guards(function)
        problems += [f"{path.relative_to(TESTS)}::{function.name} starts {p}" for p in sorted(started - declared)]
    return problems


def test_every_test_that_starts_nginx_or_redis_declares_it() -> None:
    assert [problem for path in sorted(TESTS.rglob("test_*.py")) for problem in _unguarded(path)] == []


def test_a_missing_program_is_a_skip_with_the_fix(tmp_path: Path) -> None:
    assert missing_programs("sh") is None
    reason = missing_programs("no-such-program-here")
    assert reason is not None and "no-such-program-here not installed" in reason and "apt-get install" in reason
    (tmp_path / "test_x.py").write_text("from conftest import needs\n\n\n@needs('no-such-program-here')\n"
                                        "def test_x() -> None:\n    raise AssertionError\n")
    (tmp_path / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    env = {**os.environ, "PYTHONPATH": str(TESTS)}  # what the copied conftest imports (servers.cluster)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=TESTS.parent, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SKIPPED" in done.stdout and "no-such-program-here not installed" in done.stdout


@pytest.mark.parametrize("program", sorted(STARTERS.values()))
def test_ci_installs_what_the_skipped_tests_need(program: str) -> None:
    assert program in (TESTS.parent / ".ci" / "run").read_text()
