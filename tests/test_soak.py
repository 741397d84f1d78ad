"""The soak's short variant (`bench/soak.py`, in a process of its own), run in every test run: 20 s of kills
(one every 0.6–1.4 s, so as many as the full soak makes in a minute) and bursts. The 10-minute soak is a
release gate outside the suite: `python -m bench.soak` (docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIMIT = 180.0  # start-up of 5 proxies and 15 upstreams, 20 s of load, and the shutdown, on a loaded machine


def test_twenty_seconds_of_kills_and_bursts_answer_every_call() -> None:
    command = [sys.executable, "-m", "bench.soak", "--duration", "20", "--kill-every", "0.6", "1.4"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=LIMIT)
    assert done.stdout, done.stderr[-2000:]
    report = json.loads(done.stdout)
    print(report)
    assert report["calls"] > 1000 and report["kills"] >= 10, report
    assert report["hangs"] == 0 and report["leaked_processes"] == 0, report
    assert report["success_rate"] >= 0.99, report["failures"]
