"""The cost of the ninth round's defaults (docs/segments.md): SegmentedCalibrator's new default
(``shared_slope="within"``, ``heterogeneity_alpha=0.05``) against the eighth round's
(``"marginal"``, ``None``) and the global ``auto`` map, fitted interleaved in rounds on the
offsets scenario, in CPU seconds of this process (the machine is shared: wall time is not
comparable), with the median of each and its ratio to the old default's measured in the same
run ("new default" pins ``min_rows_for_slope=None``: the ninth round's default). The eleventh
round's default (per-segment slopes kept only when Cochran's test finds them unequal:
``min_rows_for_slope=2, slope_alpha=0.05``, "sl2 a05") is fitted in the same rounds and its
ratio to the ninth round's printed too; ``--scenario slopes`` measures it where the slopes are
kept.

    python benchmarks/bench_segment_within_cost.py [--rows 1000000] [--segments 50] [--rounds 3]
        [--scenario offsets]
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
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--segments", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scenario", default="offsets",
                    choices=("offsets", "slopes", "confounded", "null"))
    args = ap.parse_args()
    s, y, g, _ = simulate(args.scenario, args.segments, args.rows, seed=0)
    fits = {
        "new default": lambda: mlcal.SegmentedCalibrator(min_rows_for_slope=None).fit(s, y, g),
        "old default": lambda: mlcal.SegmentedCalibrator(
            shared_slope="marginal", heterogeneity_alpha=None, min_rows_for_slope=None).fit(
            s, y, g),
        "global auto": lambda: mlcal.AutoCalibrator().fit(s, y),
        "sl2 a05": lambda: mlcal.SegmentedCalibrator(min_rows_for_slope=2,
                                                     slope_alpha=0.05).fit(s, y, g),
    }
    small = simulate("offsets", 5, 2000, seed=99)      # compile the kernels untimed
    for kw in ({"min_rows_for_slope": None},
               {"shared_slope": "marginal", "heterogeneity_alpha": None},
               {"min_rows_for_slope": 2, "slope_alpha": 0.05}):
        mlcal.SegmentedCalibrator(**kw).fit(*small[:3])
    times = {k: [] for k in fits}
    for r in range(args.rounds):
        names = list(fits) if r % 2 == 0 else list(fits)[::-1]
        for name in names:
            c0 = time.process_time()
            out = fits[name]()
            times[name].append(time.process_time() - c0)
            extra = f"  common slope {out.common_slope_:.4f}" if name == "new default" else ""
            if name == "sl2 a05":
                extra = f"  slopes kept {not out.slopes_tested_out_} (p {out.slope_pvalue_:.2g})"
            print(f"round {r} {name:12} {times[name][-1]:7.2f} s CPU{extra}", flush=True)
    ref = float(np.median(times["old default"]))
    now = float(np.median(times["new default"]))
    print(f"\n{y.size} rows, {args.segments} segments ({args.scenario}); median CPU seconds over "
          f"{args.rounds} rounds (x old default, x new default)")
    for name, v in times.items():
        print(f"{name:12} {np.median(v):7.2f} s  x {np.median(v) / ref:5.2f}  "
              f"x {np.median(v) / now:5.2f}")


if __name__ == "__main__":
    main()
