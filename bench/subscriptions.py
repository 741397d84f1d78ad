"""Resource subscriptions a hostile HTTP client leaves behind: memory held and what each later connection end
(`Subscriptions.forget`) costs on the event loop, 1,000 URIs to a session that never says it ended.

`--baseline FILE`: the same for another version of `proxy/downstream/lists/_resources.py`, side by side
(`git show e8c1616:proxy/downstream/lists/_resources.py > /tmp/old_resources.py` is the one before the caps).
Run: .venv/bin/python -m bench.subscriptions [--baseline FILE] [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
import tracemalloc
from typing import Any

from bench.harness import machine_summary
from proxy.downstream.lists._resources import Subscriptions


async def _notify(uri: str) -> None:
    return None


def load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("baseline_resources", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Subscriptions


def measure(cls: Any, n: int) -> tuple[float, float, float]:
    """(MiB held after `n` subscribe calls, ms CPU to forget another connection, ms CPU to forget a session)."""
    subscriptions = cls()
    tracemalloc.start()
    for i in range(n):
        uri = f"file:///tmp/x{i}"
        subscriptions.add(f"session-{i // 1000}", ("files", uri), uri, _notify)
    held = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    cpu = time.process_time()
    subscriptions.forget(object())
    other = (time.process_time() - cpu) * 1000
    cpu = time.process_time()
    subscriptions.forget(f"session-{(n - 1) // 1000}")
    own = (time.process_time() - cpu) * 1000
    return held, other, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="another _resources.py to measure side by side")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    options = parser.parse_args()
    print(machine_summary())
    versions = {"baseline": load(options.baseline)} if options.baseline else {}
    versions["this tree"] = Subscriptions
    for n in (int(s) for s in options.sizes.split(",")):
        for label, cls in versions.items():
            held, other, own = measure(cls, n)
            print(f"{n:>9,} subscribed, {label:9}: {held:6.1f} MiB held; forget another connection {other:7.2f} ms "
                  f"CPU, forget a 1,000-URI session {own:7.2f} ms CPU", flush=True)


if __name__ == "__main__":
    main()
