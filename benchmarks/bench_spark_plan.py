"""Time to build and plan one exact ``calibrated_column`` (Spark's analysis and optimisation of
the expression, then a collect of a few rows), per map kind.

Run: ``python benchmarks/bench_spark_plan.py [--repeats 2]``

Reference, same run, interleaved: the same column built with the array tables written as
``array(v1, ..., vn)`` (a ``CreateArray`` with one child per value, how ``_doubles`` built them
before), whose type Spark's analyzer recomputes over every child each time an ``element_at``
asks for its nullability. ``mlcal.spark`` now builds each table as one ``array<double>``
literal; ratio = time / reference (below 1 is faster). Wall seconds, median of the repeats
(after one warm-up of mlcal's); the machine may be shared, so compare the ratios. The outputs of
both are checked to be the same bits.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _spark import local_session  # noqa: E402  (benchmarks/ is on sys.path)


def _array_expr_doubles(values):
    """The reference: an ``array(...)`` SQL expression of the values (repr round-trips)."""
    from pyspark.sql import functions as F

    def sql(v: float) -> str:
        if np.isinf(v):
            return "CAST('Infinity' AS DOUBLE)" if v > 0 else "CAST('-Infinity' AS DOUBLE)"
        return f"{v!r}D"
    return F.expr(f"array({', '.join(sql(float(v)) for v in np.asarray(values, np.float64))})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import mlcal.spark._expressions as ex
    from mlcal.maps import BetaMap, LinearMap, QuadraticMap, SigmoidMap, StepMap
    from mlcal.spark import calibrated_column

    spark = local_session("bench_spark_plan")
    rng = np.random.default_rng(1)
    maps = {"step (300 thresholds)": StepMap(np.sort(rng.random(300)), np.sort(rng.random(301))),
            "linear, sigmoid input": LinearMap(np.sort(rng.random(200)), np.sort(rng.random(200)),
                                               input_transform="sigmoid"),
            "sigmoid": SigmoidMap(-7.3, 2.1),
            "beta": BetaMap(1.3, 0.7, -0.2),
            "quadratic": QuadraticMap(1.2, -0.06, -1.1)}
    s = np.concatenate([[0.0, 1.0, 5e-324, 0.5], rng.random(40)])
    df = spark.createDataFrame(pd.DataFrame({"s": s}))
    current = ex._doubles

    def run(m, doubles):
        ex._doubles = doubles
        try:
            start = time.perf_counter()
            out = df.select(calibrated_column(m, "s", exact=True).alias("p")).toPandas()
            return time.perf_counter() - start, out["p"].to_numpy()
        finally:
            ex._doubles = current

    print(f"{'map':26s} {'mlcal s':>9s} {'reference s':>12s} {'ratio':>7s}")
    for name, m in maps.items():
        run(m, current)          # warm-up (the reference is too slow to run more than needed)
        ours, ref = [], []
        for _ in range(args.repeats):
            t, p = run(m, current)
            ours.append(t)
            t, q = run(m, _array_expr_doubles)
            ref.append(t)
            assert np.array_equal(p.view(np.int64), q.view(np.int64)), name
            assert np.array_equal(p.view(np.int64), m(s).view(np.int64)), name
        a, b = float(np.median(ours)), float(np.median(ref))
        print(f"{name:26s} {a:9.2f} {b:12.2f} {a / b:7.3f}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
