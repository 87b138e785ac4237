"""Does ``SegmentedCalibrator("auto", min_rows_for_slope=2, slope_alpha=0.05)`` predict exactly
what the post hoc contender ``slopes_if_heterogeneous`` of bench_segmented.py ("mlcal auto sl2
test", docs/segments.md tenth round) predicts? Per draw of each simulated scenario and real set:
the maximum absolute difference of the held-out predictions, and whether the slopes were kept.
If every difference is 0, the contender's stored paired numbers are the parameter's.

    python benchmarks/check_slope_alpha.py [--draws 3] [--rows 20000] [--segments 60]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlcal  # noqa: E402
from bench_segmented import simulate_with_truth, slopes_if_heterogeneous  # noqa: E402
from bench_segments_report import real_draws  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--segments", type=int, default=60)
    args = ap.parse_args()
    sets = []
    for scenario in ("offsets", "slopes", "confounded", "null"):
        for r in range(args.draws):
            s, y, g, train, _ = simulate_with_truth(scenario, args.segments, args.rows, r)
            sets.append((scenario, r, s, y, g, train, ~train))
    for name, draws in real_draws(args.draws):
        for r, (s, y, g, fit, test, _) in enumerate(draws):
            sets.append((name, r, s, y, g, fit, test))
    worst = 0.0
    print(f"{'set':10} {'draw':>4} {'slopes kept':>11} {'p-value':>9} {'max |diff|':>10}")
    for name, r, s, y, g, fit, test in sets:
        cal = mlcal.SegmentedCalibrator("auto", min_rows_for_slope=2, slope_alpha=0.05).fit(
            s[fit], y[fit], g[fit])
        got = cal.predict(s[test], g[test])
        ref = slopes_if_heterogeneous(s[fit], y[fit], g[fit], s[test], g[test])
        diff = float(np.max(np.abs(got - ref)))
        worst = max(worst, diff)
        print(f"{name:10} {r:4d} {str(not cal.slopes_tested_out_):>11} "
              f"{cal.slope_pvalue_:9.2e} {diff:10.3g}", flush=True)
    print(f"max |diff| over all draws: {worst:.3g}")


if __name__ == "__main__":
    main()
