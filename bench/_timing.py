"""What every benchmark here measures the same way: seconds and the peak of traced allocations.

Run as ``python bench/NAME.py``: the script's folder is on ``sys.path``, so ``from _timing import timed``.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
MB = 1024 * 1024


def timed(fn: Callable[..., T], *args: object, trace: bool = True) -> tuple[float, float, T]:
    """Seconds, tracemalloc peak (MB) of what ``fn`` allocates, and its result.

    Tracing slows pure-Python code a lot and numpy code hardly at all (a few large allocations), so loops
    used as baselines are timed with ``trace=False`` and their memory measured on a separate, smaller run.
    """
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    out = fn(*args)
    seconds = time.perf_counter() - start
    peak = 0.0
    if trace:
        peak = tracemalloc.get_traced_memory()[1] / MB
        tracemalloc.stop()
    return seconds, peak, out
