"""mlcal.spark at 1e7 rows on local Spark: the exact aggregation of ``fit`` and SQL scoring.

Run: ``python benchmarks/bench_spark.py [--n 10000000] [--cores 2] [--driver-memory 4g]``

Tables printed:

1. Fitting statistics (``mlcal.spark._stats.collect_statistics``, i.e. ``mlcal.spark.fit``
   without the local fit) on ``n`` rows generated with ``spark.range``: wall time, rows of the
   aggregate brought to the driver, and the driver Python's peak RSS (``ru_maxrss``; the JVM
   heap is the ``--driver-memory`` setting, its used part is printed too; both read right after
   the timed call, before the reference runs). Reference, same run:
   Spark's own ``groupBy(score).agg(sum(label), count)`` (grid case: by ``floor(score * cells)``)
   collected with Arrow (float sums, not exact, no validation pass); ratio = time / reference.
2. Scoring ``n`` rows (forced with the ``noop`` sink): ``calibrated_column`` (JVM only), a
   pandas UDF calling ``predict`` (Python workers, calibration only) and MLflow's ``spark_udf``
   of the logged model (base model + calibration, struct of raw and calibrated values).
   Reference: the same pass that only reads the score column; ratio = time / reference.

3. ``mlcal.spark.fit`` on ``--fit-n`` (1e6) all-distinct scores vs the in-memory fit of the
   same rows (the rows already on the driver: the fit alone), with and without weights; also
   the Spark-side aggregation (``driver_rows=0``: what frames above ``max_distinct`` rows
   get) plus its fit. Median of 3 alternating runs after a warm-up; ratio = time / in-memory.
   ``--only-fit-vs-memory`` runs this table alone. The goal is ``spark.fit`` <= 5x.

Times in tables 1 and 2 are single runs after one warm-up on a shared machine: compare the
ratios.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time

import numpy as np
import pandas as pd
from _spark import local_session  # noqa: E402  (benchmarks/ is on sys.path)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # kB on Linux


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _session(cores: int, memory: str):
    return local_session("bench_spark", cores, memory, shuffle_partitions=4 * cores)


def _data(spark, n: int, decimals: int | None):
    from pyspark.sql import functions as F

    s = F.rand(seed=1)
    if decimals is not None:
        s = F.round(s, decimals)
    df = spark.range(n).select(s.alias("s"), F.rand(seed=2).alias("u"),
                               (F.rand(seed=3) * 10.0 ** (F.floor(F.rand(seed=4) * 6) - 3))
                               .alias("w"))
    return df.select("s", (F.col("u") < F.col("s") ** 2).cast("double").alias("y"), "w",
                     (F.col("s") * 4 - 2).alias("x0"), (F.rand(seed=5) - 0.5).alias("x1"))


def _reference_groupby(df, cells: int | None):
    from pyspark.sql import functions as F

    spark = df.sparkSession
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    key = F.col("s") if cells is None else F.floor(F.col("s") * cells)   # naive grid cell
    return len(df.groupBy(key.alias("k")).agg(F.sum("y"), F.count(F.lit(1))).toPandas())


def fit_table(spark, n: int) -> None:
    from mlcal.spark._stats import collect_statistics

    cases = [("4 decimals, counts", 4, None, {}), ("4 decimals, weights", 4, "w", {}),
             ("all distinct -> grid 1e5", None, None, {"grid": 100_000})]
    print(f"\n1. fit statistics, n = {n:.0e} rows")
    print(f"{'case':<26}{'seconds':>9}{'ref s':>8}{'ratio':>7}{'distinct':>11}{'aggregated':>11}"
          f"{'driver MB':>11}{'JVM used MB':>13}")
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    for name, decimals, weight, kw in cases:
        df = _data(spark, n, decimals).cache()
        df.count()                                   # materialise once, outside the timings
        collect_statistics(df, "s", "y", weight, max_distinct=None, **kw)    # warm-up
        t, st = _timed(lambda: collect_statistics(df, "s", "y", weight, max_distinct=None, **kw))
        # ru_maxrss is a high-water mark: read it before the reference collects its own rows
        # (cases run from the smallest aggregate up, so each reading is this case's peak)
        rss = _rss_mb()
        used = (runtime.totalMemory() - runtime.freeMemory()) / 2 ** 20
        ref, _ = _timed(lambda: _reference_groupby(df, kw.get("grid")))
        print(f"{name:<26}{t:>9.2f}{ref:>8.2f}{t / ref:>7.2f}{st.n_distinct:>11}"
              f"{st.n_aggregated:>11}{rss:>11.0f}{used:>13.0f}")
        df.unpersist()


def fit_vs_memory_table(spark, n: int, methods=("isotonic", "platt"), repeats: int = 3) -> None:
    """``mlcal.spark.fit`` on ``n`` all-distinct scores vs the in-memory fit of the same rows
    (already on the driver: the fit alone), median of ``repeats`` alternating runs after a
    warm-up; also the Spark-side aggregation that frames above ``max_distinct`` rows get."""
    import warnings

    import mlcal.spark
    from mlcal.calibrators.catalog import get_calibrator
    from mlcal.spark._stats import _to_pandas, collect_statistics

    warnings.filterwarnings("ignore")
    df = _data(spark, n, None).select("s", "y", "w").cache()
    df.count()
    local = df.toPandas()
    s, y, w = (local[c].to_numpy() for c in ("s", "y", "w"))
    print(f"\n3. fit on {n:.0e} all-distinct scores vs the in-memory fit (median of {repeats})")
    print(f"{'method':<10}{'weights':<9}{'in-memory s':>12}{'spark.fit s':>12}{'ratio':>7}"
          f"{'Spark-aggregated s':>19}{'ratio':>7}{'Arrow collect s':>16}{'empty job s':>12}"
          f"{'same JSON':>10}")
    for method in methods:
        for weight in (None, "w"):
            wv = None if weight is None else w
            runs = {"memory": lambda: get_calibrator(method).fit(s, y, wv),
                    "spark": lambda: mlcal.spark.fit(df, "s", "y", method, weight_col=weight),
                    "aggregated": lambda: get_calibrator(method).fit(
                        *_stats_rows(collect_statistics(df, "s", "y", weight, driver_rows=0))),
                    "collect": lambda: _to_pandas(df.select("s", "y", *([weight] if weight
                                                                         else []))),
                    "empty": lambda: df.limit(0).collect()}
            times = {k: [] for k in runs}
            outs = {}
            for round_ in range(repeats + 1):
                for k, run in runs.items():
                    t, outs[k] = _timed(run)
                    if round_:
                        times[k].append(t)
            med = {k: float(np.median(v)) for k, v in times.items()}
            same = outs["spark"].to_json() == outs["memory"].to_json() == \
                outs["aggregated"].to_json()
            print(f"{method:<10}{'yes' if weight else 'no':<9}{med['memory']:>12.2f}"
                  f"{med['spark']:>12.2f}{med['spark'] / med['memory']:>7.1f}"
                  f"{med['aggregated']:>19.2f}{med['aggregated'] / med['memory']:>7.1f}"
                  f"{med['collect']:>16.3f}{med['empty']:>12.3f}{str(same):>10}")
    df.unpersist()


def _stats_rows(st):
    return st.scores, st.labels, st.weights


def score_table(spark, n: int, methods=("isotonic", "platt", "beta")) -> None:
    import mlflow
    from pyspark.sql import functions as F
    from sklearn.linear_model import LogisticRegression

    import mlcal.mlflow
    from mlcal.model import CalibratedModel
    from mlcal.spark import calibrated_column

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x0": rng.random(4000) * 4 - 2, "x1": rng.random(4000) - 0.5})
    y = (rng.random(4000) < 1 / (1 + np.exp(-3 * X["x0"]))).astype(int)
    df = _data(spark, n, None).select("x0", "x1").cache()
    df.count()
    tmp = tempfile.mkdtemp(prefix="bench_spark_")
    mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
    print(f"\n2. scoring, n = {n:.0e} rows (noop sink)")
    print(f"{'map':<10}{'scorer':<34}{'seconds':>9}{'ratio':>8}")
    for method in methods:
        model = CalibratedModel(LogisticRegression().fit(X[:2000], y[:2000]), method)
        model.fit(X[2000:], y[2000:])
        coef, icpt = model.base_estimator.coef_[0], model.base_estimator.intercept_[0]
        # the raw score as a column: the logistic regression's probability (what predict uses)
        raw = 1.0 / (1.0 + F.exp(-(F.col("x0") * float(coef[0]) + F.col("x1") * float(coef[1])
                                  + float(icpt))))
        scored = df.select(raw.alias("raw")).cache()
        scored.count()
        cal = model.calibrator_

        @F.pandas_udf("double")
        def predict_udf(s: pd.Series) -> pd.Series:
            return pd.Series(cal.predict(s.to_numpy()))

        with mlflow.start_run():
            info = mlcal.mlflow.log_model(model, name="m", input_example=X[:3],
                                          pip_requirements=["scikit-learn", "numpy", "pandas"])
        udf = mlflow.pyfunc.spark_udf(
            spark, info.model_uri, env_manager="local", params={"return_uncalibrated": True},
            result_type="struct<p_calibrated: double, label: bigint, score_uncalibrated: double>")
        runs = {"reference: read the raw score": lambda: scored.select("raw"),
                "calibrated_column (default, fast)": lambda: scored.select(
                    calibrated_column(cal, "raw")),
                "calibrated_column exact=True": lambda: scored.select(
                    calibrated_column(cal, "raw", exact=True)),
                "pandas_udf(predict)": lambda: scored.select(predict_udf("raw")),
                "mlflow spark_udf (base + cal)": lambda: df.select(udf(F.struct("x0", "x1")))}
        times = {}
        for name, build in runs.items():
            build().write.format("noop").mode("overwrite").save()       # warm-up
            times[name], _ = _timed(
                lambda: build().write.format("noop").mode("overwrite").save())
        ref = times["reference: read the raw score"]
        for name, t in times.items():
            print(f"{method:<10}{name:<34}{t:>9.2f}{t / ref:>8.2f}")
        scored.unpersist()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--skip-scoring", action="store_true")
    ap.add_argument("--skip-fit", action="store_true")
    ap.add_argument("--fit-n", type=int, default=1_000_000,
                    help="rows of the fit vs in-memory table (3.)")
    ap.add_argument("--only-fit-vs-memory", action="store_true", help="run table 3 only")
    args = ap.parse_args()
    spark = _session(args.cores, args.driver_memory)
    print(f"local[{args.cores}], spark.driver.memory={args.driver_memory}, "
          f"driver Python peak RSS before: {_rss_mb():.0f} MB")
    if args.only_fit_vs_memory:
        fit_vs_memory_table(spark, args.fit_n)
        spark.stop()
        return
    if not args.skip_fit:
        fit_table(spark, args.n)
    if not args.skip_scoring:
        score_table(spark, args.n)
    fit_vs_memory_table(spark, args.fit_n)
    spark.stop()


if __name__ == "__main__":
    main()
