"""Segmented calibration: held-out log loss and fit time of mlcal.SegmentedCalibrator against
the shared map alone, probcal's SegmentedCalibrator and Meta's MCGrad (each when installed;
a printed note otherwise), on simulated data where the calibration differs by segment.

    python benchmarks/bench_segmented.py [--repeats 3] [--rows 40000]

Data: ``x ~ N(0, 1.5^2)``, segment ``g`` with sizes drawn log-uniformly in [20, 4000] rows
(``--segments`` of them), labels ~ Bernoulli(expit(a_g x + d_g)); the model's score is
``expit(0.8 x)`` (a common miscalibration). Scenarios: ``offsets`` (d_g ~ N(0, 0.5^2),
a_g = 1), ``slopes`` (also a_g ~ 1 + N(0, 0.25^2)), ``confounded`` (offsets, and each
segment's scores centred at ``0.8 d_g + N(0, 0.3^2)``, so a flexible shared map fitted on all
rows already bends toward the segments' offsets: where cross-fitting the offsets matters) and
``null`` (no segment effect: what the segment adjustments cost when there is nothing to
find). Half the rows fit, half score; the table shows the mean held-out log loss over
``--repeats`` draws, its ratio to the shared map's (below 1: better), and the fit time in
seconds with its ratio to the shared map's, measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import expit

import mlcal

EPS = 1e-15


def simulate(scenario: str, n_segments: int, rows: int, seed: int):
    """Scores, labels, segment keys and the fit-rows mask of one draw (see the module doc)."""
    return simulate_with_truth(scenario, n_segments, rows, seed)[:4]


def simulate_with_truth(scenario: str, n_segments: int, rows: int, seed: int):
    """:func:`simulate` plus each row's true probability (the oracle's prediction)."""
    rng = np.random.default_rng(seed)
    sizes = np.exp(rng.uniform(np.log(20), np.log(4000), n_segments))
    sizes = np.maximum(np.round(sizes / sizes.sum() * rows), 2).astype(int)
    code = np.repeat(np.arange(n_segments), sizes)
    d = rng.normal(0, 0.5, n_segments) if scenario != "null" else np.zeros(n_segments)
    a = 1 + rng.normal(0, 0.25, n_segments) if scenario == "slopes" else np.ones(n_segments)
    centre = 0.8 * d + rng.normal(0, 0.3, n_segments) if scenario == "confounded" else \
        np.zeros(n_segments)
    x = rng.normal(centre[code], 1.5)
    y = (rng.random(code.size) < expit(a[code] * x + d[code])).astype(int)
    seg = np.array([f"g{i}" for i in range(n_segments)])[code]
    train = rng.random(code.size) < 0.5
    return expit(0.8 * x), y, seg, train, expit(a[code] * x + d[code])


def log_loss(y, p):
    p = np.clip(p, EPS, 1 - EPS)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def slopes_if_heterogeneous(s, y, g, st, gt, alpha: float = 0.05):
    """``SegmentedCalibrator("auto", min_rows_for_slope=2)`` if Cochran's test rejects equal
    slopes at ``alpha``, else the ninth round's default ``SegmentedCalibrator("auto")`` (no
    slopes); computed post hoc (since the eleventh round the default fits exactly this:
    ``min_rows_for_slope=2, slope_alpha=0.05``)."""
    from mlcal.calibrators.segment_shrinkage import homogeneity_pvalue

    cal = mlcal.SegmentedCalibrator("auto", min_rows_for_slope=2, slope_alpha=None).fit(s, y, g)
    var = np.where(np.isfinite(cal.slope_var_), cal.slope_var_, np.inf)
    if homogeneity_pvalue(np.nan_to_num(cal.slope_mle_), var) < alpha:
        return cal.predict(st, gt)
    return mlcal.SegmentedCalibrator("auto", min_rows_for_slope=None).fit(s, y, g).predict(
        st, gt)


def _pre11(*args, **params):
    """A SegmentedCalibrator with the defaults before the eleventh round of docs/segments.md
    (no per-segment slopes unless asked), so that each contender below stays what its stored
    rows measured."""
    params.setdefault("min_rows_for_slope", None)
    params.setdefault("slope_alpha", None)
    return mlcal.SegmentedCalibrator(*args, **params)


def contenders():
    out = {
        "shared (beta)": lambda s, y, g, st, gt: mlcal.Beta().fit(s, y).predict(st),
        # select="off" (the default): always fit the offsets
        "mlcal offsets": lambda s, y, g, st, gt: _pre11(
            "beta", select="off").fit(s, y, g).predict(st, gt),
        # select="cv": shared map alone / offsets / offsets+slopes by held-out loss
        "mlcal beta cv": lambda s, y, g, st, gt: _pre11(
            "beta", select="cv").fit(s, y, g).predict(st, gt),
        "mlcal beta+sl cv": lambda s, y, g, st, gt: _pre11(
            "beta", min_rows_for_slope=200, select="cv").fit(s, y, g).predict(st, gt),
        "mlcal in-sample": lambda s, y, g, st, gt: _pre11(
            "beta", n_folds=None).fit(s, y, g).predict(st, gt),
        "mlcal +slopes": lambda s, y, g, st, gt: _pre11(
            "beta", min_rows_for_slope=500, select="off").fit(s, y, g).predict(st, gt),
        "mlcal iso in-sam": lambda s, y, g, st, gt: _pre11(
            "isotonic", n_folds=None).fit(s, y, g).predict(st, gt),
        "mlcal iso cv": lambda s, y, g, st, gt: _pre11("isotonic").fit(
            s, y, g).predict(st, gt),
        "mlcal auto off": lambda s, y, g, st, gt: _pre11(
            "auto", select="off").fit(s, y, g).predict(st, gt),
        # the default of the seventh and eighth rounds (before shared_slope and
        # heterogeneity_alpha): the rows those rounds stored as "mlcal auto off"
        "mlcal auto old": lambda s, y, g, st, gt: _pre11(
            "auto", shared_slope="marginal", heterogeneity_alpha=None).fit(s, y, g).predict(
            st, gt),
        # tau="integrated": offsets averaged over the posterior of tau (half-Cauchy prior)
        "mlcal auto int": lambda s, y, g, st, gt: _pre11(
            "auto", tau="integrated").fit(s, y, g).predict(st, gt),
        "mlcal beta int": lambda s, y, g, st, gt: _pre11(
            "beta", tau="integrated").fit(s, y, g).predict(st, gt),
        # shrinkage="regression": the offsets' prior centre moves with the segment's mean
        # shared logit (docs/segments.md, eighth round)
        "mlcal auto reg": lambda s, y, g, st, gt: _pre11(
            "auto", shrinkage="regression").fit(s, y, g).predict(st, gt),
        "mlcal auto cv": lambda s, y, g, st, gt: _pre11(
            "auto", select="cv").fit(s, y, g).predict(st, gt),
        # shared_slope="within": a common slope on the shared logit fitted with the segment
        # intercepts; heterogeneity_alpha: no offsets unless Cochran's test finds an effect
        # (docs/segments.md, ninth round)
        "mlcal auto within": lambda s, y, g, st, gt: _pre11(
            "auto", shared_slope="within").fit(s, y, g).predict(st, gt),
        "mlcal auto het05": lambda s, y, g, st, gt: _pre11(
            "auto", heterogeneity_alpha=0.05).fit(s, y, g).predict(st, gt),
        "mlcal auto within het05": lambda s, y, g, st, gt: _pre11(
            "auto", shared_slope="within", heterogeneity_alpha=0.05).fit(s, y, g).predict(
            st, gt),
        # every segment with both classes gets a slope, shrunk toward the others' by the
        # slopes' REML prior (docs/segments.md, tenth round)
        "mlcal auto sl2": lambda s, y, g, st, gt: _pre11(
            "auto", min_rows_for_slope=2).fit(s, y, g).predict(st, gt),
        # the same, keeping the slopes only when Cochran's test finds them unequal at 0.05
        # (as heterogeneity_alpha tests the offsets), else the default fit: what such a test
        # in the fit would store (docs/segments.md, tenth round; slope_alpha since the
        # eleventh)
        "mlcal auto sl2 test": slopes_if_heterogeneous,
        "mlcal auto+sl cv": lambda s, y, g, st, gt: _pre11(
            "auto", min_rows_for_slope=200, select="cv").fit(s, y, g).predict(st, gt),
        # the default since the eleventh round: the fit of "mlcal auto sl2 test" (equal
        # predictions: benchmarks/check_slope_alpha.py)
        "mlcal auto": lambda s, y, g, st, gt: mlcal.SegmentedCalibrator("auto").fit(
            s, y, g).predict(st, gt),
    }
    try:
        import probcal

        def run_probcal(s, y, g, st, gt):
            p = np.asarray(probcal.SegmentedCalibrator().fit(s, y, segments=g)
                           .predict_proba(st, segments=gt))
            return p[:, 1] if p.ndim == 2 else p

        out["probcal"] = run_probcal
    except ImportError:
        print("note: probcal is not installed; its column is skipped")
    try:
        import pandas as pd
        from mcgrad.methods import MCGrad

        def run_mcgrad(s, y, g, st, gt):
            m = MCGrad(random_state=0)
            m.fit(pd.DataFrame({"p": s, "y": y, "g": g}), "p", "y",
                  categorical_feature_column_names=["g"])
            return np.asarray(m.predict(pd.DataFrame({"p": st, "g": gt}), "p",
                                        categorical_feature_column_names=["g"]))

        out["mcgrad"] = run_mcgrad
    except ImportError:
        print("note: mcgrad is not installed (it lives in the peers venv); its column is "
              "skipped")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--segments", type=int, default=60)
    ap.add_argument("--skip", nargs="*", default=[], help="contenders to leave out")
    args = ap.parse_args()
    runs = {k: v for k, v in contenders().items() if k not in args.skip}
    s, y, g, train = simulate("offsets", 5, 2000, seed=99)   # compile the kernels untimed
    for run in runs.values():
        run(s[train], y[train], g[train], s[~train], g[~train])
    print(f"{args.rows} rows, {args.segments} segments, {args.repeats} draws per scenario")
    print(f"{'scenario':10} {'method':16} {'log loss':>9} {'x shared':>9} {'fit s':>7} "
          f"{'time x shared':>13}")
    for scenario in ("offsets", "slopes", "confounded", "null"):
        losses = {k: [] for k in runs}
        times = {k: [] for k in runs}
        for r in range(args.repeats):
            s, y, g, train = simulate(scenario, args.segments, args.rows, seed=r)
            test = ~train
            for name, run in runs.items():
                t0 = time.perf_counter()
                p = run(s[train], y[train], g[train], s[test], g[test])
                times[name].append(time.perf_counter() - t0)
                losses[name].append(log_loss(y[test], p))
        shared = "shared (beta)"
        ref = np.mean(losses[shared]) if shared in runs else np.nan
        ref_time = np.mean(times[shared]) if shared in runs else np.nan
        for name in runs:
            ll = float(np.mean(losses[name]))
            t = float(np.mean(times[name]))
            print(f"{scenario:10} {name:16} {ll:9.5f} {ll / ref:9.4f} {t:7.2f} "
                  f"{t / ref_time:13.1f}")


if __name__ == "__main__":
    main()
