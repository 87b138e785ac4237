"""Fit time of the binary ``auto`` with repeated K-fold CV (``cv_repeats``) against one
partition, interleaved in one process (CPU time, median over repeats after a warm-up).

    PYTHONPATH=. python benchmarks/bench_auto_repeats.py --sizes 200 1000 5000 --repeats 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import mlcal


def data(n: int, seed: int = 0):
    """Beta-distributed scores with ``y ~ Bernoulli(s ** 0.7)`` (bench_auto_speed's sim-beta)."""
    rng = np.random.default_rng(seed)
    s = rng.beta(2.0, 5.0, size=n)
    return s, (rng.random(n) < s ** 0.7).astype(int)


def cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 1000, 5000])
    ap.add_argument("--r", type=int, nargs="+", default=[3, 5], help="cv_repeats compared to 1")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    print("| N | cv_repeats | auto ms (median) | ratio to cv_repeats=1 | chosen |")
    print("|---|---|---|---|---|")
    for n in args.sizes:
        s, y = data(n)
        settings = [1] + list(args.r)
        fits = {r: mlcal.AutoCalibrator(cv_repeats=r) for r in settings}
        for r in settings:   # warm-up (compiled kernels, caches)
            fits[r].fit(s, y)
        times = {r: [] for r in settings}
        for _ in range(args.repeats):
            for r in settings:   # interleaved
                times[r].append(cpu(lambda: fits[r].fit(s, y)))
        ref = float(np.median(times[1]))
        for r in settings:
            med = float(np.median(times[r]))
            print(f"| {n} | {r} | {1e3 * med:.1f} | {med / ref:.2f} | {fits[r].chosen_} "
                  f"(repeats used: {fits[r].selection_['cv_repeats']}) |")


if __name__ == "__main__":
    main()
