"""Timing helper shared by the benchmark scripts (run them from anywhere as
``python benchmarks/<script>.py``; this folder is then first on ``sys.path``)."""

from __future__ import annotations

import time


def best_time(fn, repeats: int = 3, warmup: bool = True) -> float:
    """Best wall time of ``repeats`` calls of ``fn``, after one untimed warm-up call (numba
    compilation and caches excluded)."""
    if warmup:
        fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
