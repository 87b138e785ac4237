"""Diagnosis of the two residuals of docs/segments.md "Eighth round" (issue #30).

``confounded``: per simulated draw of the confounded scenario, the default SegmentedCalibrator's
worst held-out segment (rows, |O-E|, the truth's |O-E| on the same segment, its shrinkage
factor) and the within-segment calibration slope of the held-out predictions (a common slope on
``logit(p)`` with one intercept per segment, fitted by maximum likelihood) against the truth's;
``--variant shared_slope:within`` also fits that SegmentedCalibrator setting and compares its
within-segment slope (string parameters only).

``real``: per split of a packaged real set (``--set diabetes`` or ``gapminder``), whether the
segmented fit's shared map is global ``auto``'s bit for bit, the offsets' maximum-likelihood
estimates on the calibration third and on the held-out third (against the same shared map), and
post-hoc variants of the average over ``tau`` applied to the fit's own offset estimates (a
flat prior on ``mu``, mlcal's, against the centre fixed at 0; half-Cauchy scale 1 or 0.5;
midpoint quadrature on 4,000 nodes, a check, not mlcal's deterministic one), scored held out.

    python benchmarks/diagnose_segment_residuals.py confounded [--draws 0-19] [--variant k:v,...]
    python benchmarks/diagnose_segment_residuals.py real --set diabetes [--splits 50]
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlcal  # noqa: E402
from bench_segmented import log_loss, simulate_with_truth  # noqa: E402
from bench_segments_report import parse_draws, real_draws, worst_segment_errors  # noqa: E402
from mlcal.calibrators.segment_shrinkage import segment_offsets  # noqa: E402
from mlcal.metrics import segment_report  # noqa: E402


def within_slope(y, p, g) -> float:
    """Maximum-likelihood common slope of ``logit(p)`` with one intercept per segment."""
    p = np.clip(p, 1e-12, 1 - 1e-12)
    l = np.log(p) - np.log1p(-p)
    codes = np.unique(g, return_inverse=True)[1]
    k = int(codes.max()) + 1

    def nll(th):
        z = th[0] * l + th[1:][codes]
        return float(np.sum(np.logaddexp(0.0, z) - y * z))

    def grad(th):
        e = expit(th[0] * l + th[1:][codes]) - y
        return np.r_[np.sum(e * l), np.bincount(codes, weights=e, minlength=k)]

    return float(minimize(nll, np.r_[1.0, np.zeros(k)], jac=grad, method="L-BFGS-B").x[0])


def confounded(draws, variant: dict | None = None) -> None:
    rows, var_slopes = [], []
    for r in draws:
        s, y, g, tr, truth = simulate_with_truth("confounded", 60, 20_000, r)
        te = ~tr
        cal = mlcal.SegmentedCalibrator().fit(s[tr], y[tr], g[tr])
        p = cal.predict(s[te], g[te])
        worst = max(segment_report(y[te], p, g[te], min_segment_rows=100).eligible,
                    key=lambda x: abs(x["citl"]))
        oracle = {x["label"]: x for x in segment_report(y[te], truth[te], g[te],
                                                        min_segment_rows=100).eligible}
        idx = {k[0]: i for i, k in enumerate(cal.segments_)}
        row = (worst["rows"], abs(worst["citl"]), abs(oracle[worst["label"]]["citl"]),
               cal.offset_shrinkage_[idx[worst["label"]]], within_slope(y[te], p, g[te]),
               within_slope(y[te], truth[te], g[te]))
        rows.append(row)
        extra = ""
        if variant:
            pv = mlcal.SegmentedCalibrator(**variant).fit(s[tr], y[tr], g[tr]).predict(
                s[te], g[te])
            var_slopes.append(within_slope(y[te], pv, g[te]))
            extra = f"  variant {var_slopes[-1]:.3f}"
        print(f"draw {r:2d} worst {worst['label']:4} rows {row[0]:4d} |O-E| {row[1]:.4f} "
              f"(truth {row[2]:.4f}) factor {row[3]:.2f}  within-segment slope {row[4]:.3f} "
              f"(truth {row[5]:.3f}){extra}", flush=True)
    a = np.array(rows, dtype=float)
    d = a[:, 4] - a[:, 5]
    print(f"mean worst |O-E| {a[:, 1].mean():.4f}, truth on that segment {a[:, 2].mean():.4f}, "
          f"rows {int(a[:, 0].min())}-{int(a[:, 0].max())}, factor {a[:, 3].mean():.2f}; "
          f"within-segment slope {a[:, 4].mean():.3f} (truth {a[:, 5].mean():.3f}; paired "
          f"{d.mean():+.3f} +- {d.std(ddof=1) / math.sqrt(d.size):.3f})")
    if variant:
        v = np.array(var_slopes)
        dv, dd = v - a[:, 5], v - a[:, 4]
        print(f"variant {variant}: within-segment slope {v.mean():.3f} (paired against the "
              f"truth {dv.mean():+.3f} +- {dv.std(ddof=1) / math.sqrt(dv.size):.3f}, against "
              f"the default {dd.mean():+.3f} +- {dd.std(ddof=1) / math.sqrt(dd.size):.3f})")


def integrated(d, v, scale: float, centre0: bool):
    u = (np.arange(4000) + 0.5) / 4000
    tau = u / (1 - u)
    t2 = tau[:, None] ** 2 + v[None, :]
    if centre0:
        mu = np.zeros(tau.size)
        ll = -0.5 * np.sum(np.log(t2) + d ** 2 / t2, axis=1)
    else:
        prec = 1 / t2
        mu = (prec @ d) / prec.sum(1)
        ll = -0.5 * (np.sum(np.log(t2) + (d - mu[:, None]) ** 2 / t2, axis=1)
                     + np.log(prec.sum(1)))
    lw = ll + np.log(1 / (1 + (tau / scale) ** 2) / (1 - u) ** 2)
    wt = np.exp(lw - lw.max())
    wt /= wt.sum()
    return wt @ (mu[:, None] + tau[:, None] ** 2 / t2 * (d - mu[:, None]))


def real(set_name: str, splits: int) -> None:
    res, mle, same = {}, [], 0
    for name, draws in real_draws(splits):
        if name != set_name:
            continue
        for s, y, g, fit, test, _ in draws:
            cal = mlcal.SegmentedCalibrator().fit(s[fit], y[fit], g[fit])
            pg = mlcal.AutoCalibrator().fit(s[fit], y[fit]).predict(s[test])
            q = cal.shared_calibrator_.predict(s[test])
            same += bool(np.array_equal(pg, q))
            idx = {k[0]: i for i, k in enumerate(cal.segments_)}
            gi = np.array([idx.get(x, -1) for x in g[test]])
            lq = np.log(np.clip(q, 1e-15, 1 - 1e-15)) - np.log1p(-np.clip(q, 1e-15, 1 - 1e-15))
            held, _ = segment_offsets(lq, y[test].astype(float), np.ones(lq.size),
                                      np.where(gi < 0, 0, gi), len(idx), np.zeros(len(idx)))
            mle.append(np.r_[cal.offset_mle_, held])
            d, v = cal.offset_mle_, cal.offset_var_
            out = {"global auto": pg, "default": cal.predict(s[test], g[test])}
            for label, sc, c0 in (("flat mu, scale 1", 1.0, False),
                                  ("centre 0, scale 1", 1.0, True),
                                  ("flat mu, scale 0.5", 0.5, False),
                                  ("centre 0, scale 0.5", 0.5, True)):
                off = integrated(d, v, sc, c0)
                out[label] = expit(lq + np.append(off, 0.0)[gi])
            for k, p in out.items():
                res.setdefault(k, []).append(
                    (log_loss(y[test], p), worst_segment_errors(y[test], p, g[test], 30)[0]))
    m = np.array(mle)
    k = m.shape[1] // 2
    print(f"{set_name}: shared map == global auto in {same} of {splits} splits")
    print("offset MLE, calibration third (cross-fitted):", np.round(m[:, :k].mean(0), 3))
    print("offset MLE, held-out third (same map):        ", np.round(m[:, k:].mean(0), 3))
    print("correlation of the two, first segment: "
          f"{np.corrcoef(m[:, 0], m[:, k])[0, 1]:.2f}")
    base, dflt = np.array(res["global auto"]), np.array(res["default"])
    for name, v in res.items():
        v = np.array(v)
        d1, d2 = v[:, 0] - base[:, 0], v[:, 1] - dflt[:, 1]
        print(f"  {name:20} log loss x global {v[:, 0].mean() / base[:, 0].mean():.4f}  - global "
              f"{d1.mean():+.5f} +- {d1.std(ddof=1) / math.sqrt(d1.size):.5f} "
              f"({int((d1 < 0).sum())})  worst |O-E| - default {d2.mean():+.4f} +- "
              f"{d2.std(ddof=1) / math.sqrt(d2.size):.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["confounded", "real"])
    ap.add_argument("--draws", default="0-19")
    ap.add_argument("--set", default="diabetes")
    ap.add_argument("--splits", type=int, default=50)
    ap.add_argument("--variant", default=None,
                    help='confounded: also fit SegmentedCalibrator(**these), "key:value,..."')
    args = ap.parse_args()
    if args.what == "confounded":
        variant = None
        if args.variant:
            variant = dict(item.partition(":")[::2] for item in args.variant.split(","))
        confounded(parse_draws(args.draws), variant)
    else:
        real(args.set, args.splits)


if __name__ == "__main__":
    main()
