"""Cost of a data-taken score clamp (issue #26) in Spark SQL: a beta or quadratic map whose
``clamp`` reaches down to ``2^-1022`` searches ``log s``'s binary exponent over 1023 powers of
two (10 steps) instead of the default clamp's 42 (6 steps), and ``log1p(-s)``'s over 54 when
``hi = 1 - 2^-53``.

Run: ``python benchmarks/bench_spark_clamp.py [--rows 50000] [--repeats 3]``, or
``python benchmarks/bench_spark_clamp.py --quality [--cells 100] [--seeds 4]`` (below).

Reference, same run, interleaved: the same map with the default clamp
``[BETA_EPS, 1 - BETA_EPS]``. Each timing builds the column, plans it and evaluates it on every
row of a cached frame (``max`` of the column), exact (``exact=True``) and the default fast
expit; wall seconds, median of the repeats after one warm-up of each. Ratio = widest clamp /
default clamp. The outputs are checked against ``predict`` (exact: same bits) on a sample.

``--quality``: the clamp of grid-mode fits (issue #26 at Spark scale). On the naive-Bayes tasks
of bench_quality.py (GaussianNB on breast_cancer and digits<5, 4 seeds, and on the two
make_classification sets at 200/300/600/1000 calibration rows: 16 tasks, the 16 NB tasks of
bench_logit_clamp.py), each logit-family method (and ``auto``) is fitted in memory and from
Spark statistics on a grid of ``--cells`` cells (forced, as a frame with more distinct scores
than ``max_distinct`` is), with its held-out log loss (predictions clipped to
``[1e-15, 1 - 1e-15]``) and AUC of the map applied to the raw test scores. Grids:

* ``equal, midpoints``: the default equal cells, the clamp taken from the cell midpoints (the
  fit of the rounded rows as they are: mlcal before the clamp was aggregated);
* ``equal, data clamp``: the equal cells with the clamp of the rows themselves (what
  ``mlcal.spark.fit`` does now with an explicit ``grid=`` number of cells);
* ``equal + binades``: the equal cells, the first and the last refined by one cell per binade
  (``2^-k`` and ``1 - 2^-k`` down to the data clamp; ``mlcal.spark._grid.binade_edges``): the
  default grid now when the scores saturate (passed here as explicit edges, the same cells);
* ``log-odds``: ``--cells`` cells equal in log-odds over the data clamp (explicit edges).

Printed per grid: the mean over tasks and methods of the held-out log loss and AUC, their mean
difference to the in-memory fit, the largest AUC loss, and the largest ``grid_error_``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _spark import local_session  # noqa: E402  (benchmarks/ is on sys.path)


METHODS = ("beta", "platt-logit", "temperature", "quadratic", "auto")


def quality(spark, cells: int, seeds: int) -> None:
    """Grid-mode fits against the in-memory fit on the NB tasks (see the module notes)."""
    import sys
    import warnings
    from pathlib import Path

    from sklearn.metrics import log_loss, roc_auc_score

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_quality import real_tasks

    import mlcal
    from mlcal._solvers.detmath import det_expit_array
    from mlcal.calibrators.catalog import get_calibrator
    from mlcal.calibrators.output_floor import represented_rows
    from mlcal.maps.binary import data_clamp, rounded_scores_clamp
    from mlcal.spark._grid import grid_error, make_grid
    from mlcal.spark._stats import collect_statistics

    def figures(y, p):
        p = np.clip(p, 1e-15, 1 - 1e-15)
        return float(log_loss(y, p, labels=[0, 1])), float(roc_auc_score(y, p))

    def fit(method, s, y, w=None, clamps=None, rows=None):
        cal = mlcal.AutoCalibrator() if method == "auto" else get_calibrator(method)
        with warnings.catch_warnings(), represented_rows(rows), rounded_scores_clamp(clamps):
            warnings.simplefilter("ignore")
            return cal.fit(s, y, w)

    tasks = [t for t in real_tasks([200, 300, 600, 1000], seeds, ("linear",))
             if t.name.split("/")[1] == "NB"]
    variants = ("equal, midpoints", "equal, data clamp", "equal + binades", "log-odds")
    rows = {v: [] for v in variants}
    n_sat = 0
    for t in tasks:
        s, y = np.asarray(t.s_cal, dtype=float), np.asarray(t.y_cal, dtype=float)
        s_te, y_te = np.asarray(t.s_test, dtype=float), np.asarray(t.y_test)
        inner = s[(s > 0) & (s < 1)]
        n_sat += bool(((inner < 2.0 ** -40) | (inner > 1 - 2.0 ** -40)).any())
        df = spark.createDataFrame(pd.DataFrame({"s": s, "y": y})).repartition(2)
        lo, hi = data_clamp(s)
        z = np.log(lo) - np.log1p(-lo), np.log(hi) - np.log1p(-hi)
        refined = make_grid(cells, float(s.min()), float(s.max()), refine=(lo, hi))
        grids = {"equal": cells, "equal + binades": refined.edges,
                 "log-odds": det_expit_array(np.linspace(z[0], z[1], cells + 1)[1:-1])}
        stats = {}
        for name, grid in grids.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                stats[name] = collect_statistics(df, "s", "y", grid=grid)
            assert stats[name].clamps["identity"] == (lo, hi), (t.name, name)
        for method in METHODS:
            ref = figures(y_te, fit(method, s, y).predict(s_te))
            for v in variants:
                st = stats[v.split(",")[0]]
                cal = fit(method, st.scores, st.labels, st.weights,
                          None if v == "equal, midpoints" else st.clamps, st.n_weighted_rows)
                got = figures(y_te, cal.predict(s_te))
                rows[v].append((*got, got[0] - ref[0], got[1] - ref[1],
                                grid_error(cal.map_, st.grid), *ref))
    print(f"\ngrid-mode fits vs in-memory: {len(tasks)} NB tasks ({n_sat} with saturated "
          f"calibration scores) x {len(METHODS)} methods, {cells} cells")
    print("| grid | log loss | AUC | log loss - memory | AUC - memory | worst AUC - memory "
          "| max grid_error_ |")
    print("|---|---|---|---|---|---|---|")
    ref = np.array(rows[variants[0]])[:, 5:7].mean(0)
    print(f"| in memory | {ref[0]:.5f} | {ref[1]:.5f} | | | | |")
    for v in variants:
        a = np.array(rows[v])
        print(f"| {v} | {a[:, 0].mean():.5f} | {a[:, 1].mean():.5f} | {a[:, 2].mean():+.5f} "
              f"| {a[:, 3].mean():+.5f} | {a[:, 3].min():+.5f} | {a[:, 4].max():.3g} |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quality", action="store_true",
                        help="grid-mode fits against in-memory fits instead of the timing")
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args()
    if args.quality:
        spark = local_session("bench_spark_clamp")
        quality(spark, args.cells, args.seeds)
        spark.stop()
        return
    from pyspark.sql import functions as F

    from mlcal._solvers.detmath import det_expit_array
    from mlcal.maps import BetaMap, QuadraticMap
    from mlcal.spark import calibrated_column

    spark = local_session("bench_spark_clamp")
    rng = np.random.default_rng(1)
    # naive-Bayes-like scores: log-odds over hundreds (many far below 2^-40, exact 0 and 1)
    s = det_expit_array(rng.normal(0.0, 250.0, args.rows))
    df = spark.createDataFrame(pd.DataFrame({"s": s})).cache()
    df.count()
    sample = s[:2000]
    small = spark.createDataFrame(pd.DataFrame({"s": sample}))
    widest = (2.0 ** -1022, 1.0 - 2.0 ** -53)
    pairs = {"beta": (BetaMap(0.05, 0.04, 0.3), BetaMap(0.05, 0.04, 0.3, clamp=widest)),
             "quadratic": (QuadraticMap(0.1, -0.0002, 0.3),
                           QuadraticMap(0.1, -0.0002, 0.3, clamp=widest))}

    def run(m, exact: bool) -> float:
        start = time.perf_counter()
        df.select(F.max(calibrated_column(m, "s", exact=exact))).collect()
        return time.perf_counter() - start

    print(f"rows: {args.rows}, repeats: {args.repeats}")
    print(f"{'map':10s} {'exact':>6s} {'default s':>10s} {'widest s':>9s} {'ratio':>7s}")
    for name, (ref_map, wide_map) in pairs.items():
        for m in (ref_map, wide_map):
            got = small.select(calibrated_column(m, "s", exact=True).alias("p")).toPandas()
            assert np.array_equal(got["p"].to_numpy().view(np.int64),
                                  m(sample).view(np.int64)), name
        for exact in (True, False):
            run(ref_map, exact), run(wide_map, exact)          # warm-up
            ref, wide = [], []
            for _ in range(args.repeats):
                ref.append(run(ref_map, exact))
                wide.append(run(wide_map, exact))
            a, b = float(np.median(ref)), float(np.median(wide))
            print(f"{name:10s} {str(exact):>6s} {a:10.2f} {b:9.2f} {b / a:7.3f}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
