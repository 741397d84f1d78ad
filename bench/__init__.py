"""Benchmarks, each run as `python -m bench.<name>`.

In-process measurements use numpy as `toolbridge serve` does, with BLAS on one thread (see proxy/cli.py);
this runs before any benchmark imports numpy.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
