"""Fit time of ``SegmentedCalibrator()`` (``auto`` shared map, cross-fitted) with the folds fitting
the method auto chose (``fold_shared="chosen"``, the default) against auto again in every fold
(``"repeat"``, the earlier behaviour), interleaved in one run on ``bench_segmented``'s simulated
offsets scenario; CPU seconds of this process (``time.process_time``) and their ratio.

    python benchmarks/bench_segment_fold_fits.py [--rows 20000 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlcal  # noqa: E402
from bench_segmented import simulate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="*", default=[20_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    small = simulate("offsets", 5, 2000, seed=99)          # compile the kernels untimed
    for mode in ("chosen", "repeat"):
        mlcal.SegmentedCalibrator(fold_shared=mode).fit(*small[:3])
    print(f"{'rows':>9} {'chosen s':>9} {'repeat s':>9} {'chosen / repeat':>15}")
    for rows in args.rows:
        times: dict[str, list[float]] = {"chosen": [], "repeat": []}
        for r in range(args.repeats):
            s, y, g, _ = simulate("offsets", 60 if rows <= 100_000 else 50, rows, seed=r)
            for mode in (("chosen", "repeat") if r % 2 == 0 else ("repeat", "chosen")):
                t0 = time.process_time()
                mlcal.SegmentedCalibrator(fold_shared=mode).fit(s, y, g)
                times[mode].append(time.process_time() - t0)
        c, p = np.mean(times["chosen"]), np.mean(times["repeat"])
        print(f"{rows:9d} {c:9.2f} {p:9.2f} {c / p:15.2f}", flush=True)


if __name__ == "__main__":
    main()
