"""`toolbridge` with a note of when its interpreter was up and when its imports were done.

`python -m bench.stamped STAMP.json serve ...` imports the SDK (`mcp`), then toolbridge's CLI, writes
`{"pid", "up", "sdk", "imported"}` to STAMP.json (each `[wall, cpu]`: `time.time()`, comparable with
the benchmark's clock, and this process's CPU seconds so far) and runs `toolbridge` with the rest of
the arguments. Importing `mcp` first splits the import time into the SDK's share and toolbridge's
own: `proxy.cli` imports `mcp` anyway, so nothing runs that `python -m proxy` would not run.
"""

import json
import os
import sys
import time

up = [time.time(), time.process_time()]
import mcp  # noqa: E402, F401

sdk = [time.time(), time.process_time()]
from proxy.cli import main  # noqa: E402

imported = [time.time(), time.process_time()]

if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as stamp:
        json.dump({"pid": os.getpid(), "up": up, "sdk": sdk, "imported": imported}, stamp)
    sys.exit(main(sys.argv[2:]))
