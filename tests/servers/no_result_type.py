"""A server that leaves `resultType` out of every result: the `MCPServer` fixture behind a filter of its stdout.

The reference everything-server omits it on its streamed 2026-07-28 `tools/call` results; the spec says an
omitted `resultType` counts as `complete`. Run as a stdio upstream: `python tests/servers/no_result_type.py`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().with_name("mcpserver_fixture.py")


def main() -> None:
    child = subprocess.Popen([sys.executable, str(FIXTURE)], stdin=sys.stdin, stdout=subprocess.PIPE)
    assert child.stdout is not None
    for line in child.stdout:
        message = json.loads(line)
        if isinstance(message.get("result"), dict):
            message["result"].pop("resultType", None)
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
