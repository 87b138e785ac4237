"""Why the worst segment is lost (issue #30): the held-out worst-segment |O - E| and global
log loss of the empirical-Bayes posterior means (``shrinkage="mean"``) against the same
fit's unshrunk maximum-likelihood offsets, Efron-Morris limited translation (the posterior
mean kept within ``c`` standard errors of the MLE) and constrained Bayes (the default
``shrinkage="constrained"``: :func:`mlcal.calibrators.segment_shrinkage.constrained_shrink`),
on ``bench_segmented``'s simulated draws.

    python benchmarks/bench_segment_shrinkage.py [--repeats 3] [--rows 20000] [--segments 60]

One ``SegmentedCalibrator("beta", shrinkage="mean")`` fit (cross-fitted, ``select="off"``)
per draw; the variants
only change the offsets applied to the shared map's held-out logits. Worst |O - E|: among
segments with at least 100 held-out rows, as in ``bench_segments_report.py``.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from scipy.special import expit, logit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlcal  # noqa: E402
from bench_segmented import log_loss, simulate_with_truth  # noqa: E402
from mlcal.calibrators.segment_shrinkage import constrained_shrink  # noqa: E402


def worst(y, p, g, min_rows=100):
    return max(abs(y[g == k].mean() - p[g == k].mean()) for k in np.unique(g)
               if (g == k).sum() >= min_rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--segments", type=int, default=60)
    args = ap.parse_args()
    print(f"{'scenario':11} {'offsets':22} {'log loss':>9} {'worst|O-E|':>10}")
    for scen in ("offsets", "slopes", "confounded", "null"):
        res: dict[str, list] = {}
        for r in range(args.repeats):
            s, y, g, tr, _ = simulate_with_truth(scen, args.segments, args.rows, r)
            te = ~tr
            cal = mlcal.SegmentedCalibrator("beta", shrinkage="mean").fit(s[tr], y[tr], g[tr])
            idx = {k[0]: i for i, k in enumerate(cal.segments_)}
            gi = np.array([idx[k] for k in g[te]])
            lsh = logit(np.clip(cal.shared_calibrator_.predict(s[te]), 1e-15, 1 - 1e-15))
            d, sd, post = cal.offset_mle_, np.sqrt(cal.offset_var_), cal.map_.offsets
            variants = {"posterior mean (stored)": post, "MLE (no shrinkage)": d}
            for c in (0.25, 0.5, 1.0):
                variants[f"limited, c = {c}"] = np.clip(post, d - c * sd, d + c * sd)
            variants["constrained Bayes"] = constrained_shrink(d, cal.offset_var_,
                                                               *cal.offset_prior_)[0]
            for name, off in variants.items():
                p = expit(lsh + off[gi])
                res.setdefault(name, []).append((log_loss(y[te], p), worst(y[te], p, g[te])))
        for name, v in res.items():
            m = np.mean(v, axis=0)
            print(f"{scen:11} {name:22} {m[0]:9.5f} {m[1]:10.4f}", flush=True)


if __name__ == "__main__":
    main()
