"""Run a Python module with cProfile switched by SIGUSR1 (bench use only).

`python -m bench.profiled OUT.prof MODULE ARG...` runs `python -m MODULE ARG...`, timing CPU, not
wall-clock time (a write that wakes the peer would otherwise be charged for the peer's turn). The first SIGUSR1
starts profiling, the second stops it and writes the stats to OUT.prof, so a driver profiles just
the calls it makes, not start-up or shutdown. Used by `bench/call_profile.py`; `proxy/` knows
nothing of it.
"""

import cProfile
import os
import runpy
import signal
import sys
import time
from types import FrameType

if __name__ == "__main__":
    out, module, *rest = sys.argv[1:]
    profiler = cProfile.Profile(time.process_time)  # CPU: waiting on a pipe is not cost
    running = False

    def toggle(signum: int, frame: FrameType | None) -> None:
        global running
        if running:
            profiler.disable()
            profiler.dump_stats(out + ".part")
            os.replace(out + ".part", out)  # the driver waits for OUT to exist: it must appear whole
        else:
            profiler.enable()
        running = not running

    signal.signal(signal.SIGUSR1, toggle)
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
