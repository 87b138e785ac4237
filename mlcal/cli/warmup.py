"""``mlcal warmup``: compile every numba kernel into numba's cache once, after installing."""

from __future__ import annotations

import os
import time


def run(args) -> int:
    from mlcal.warmup import warmup

    where = os.environ.get("NUMBA_CACHE_DIR") or "__pycache__ beside mlcal's sources"
    print(f"compiling mlcal's numba kernels into the cache ({where})")
    start = time.perf_counter()
    warmup(args.methods, progress=print)
    print(f"done in {time.perf_counter() - start:.1f} s; later processes load the cached code")
    return 0


def register(sub) -> None:
    p = sub.add_parser("warmup", help="compile all numba kernels now (run once after install)",
                       description="Fit every calibrator on small synthetic data so numba "
                                   "compiles each kernel and caches it on disk "
                                   "(NUMBA_CACHE_DIR). Afterwards a first fit in a new process "
                                   "loads the cached code instead of compiling for seconds.")
    p.add_argument("--methods", nargs="+", default=None,
                   help="calibrators to warm up (default: all)")
    p.set_defaults(handler=run)
