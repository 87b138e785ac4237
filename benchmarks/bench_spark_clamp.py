"""Cost of a data-taken score clamp (issue #26) in Spark SQL: a beta or quadratic map whose
``clamp`` reaches down to ``2^-1022`` searches ``log s``'s binary exponent over 1023 powers of
two (10 steps) instead of the default clamp's 42 (6 steps), and ``log1p(-s)``'s over 54 when
``hi = 1 - 2^-53``.

Run: ``python benchmarks/bench_spark_clamp.py [--rows 50000] [--repeats 3]``

Reference, same run, interleaved: the same map with the default clamp
``[BETA_EPS, 1 - BETA_EPS]``. Each timing builds the column, plans it and evaluates it on every
row of a cached frame (``max`` of the column), exact (``exact=True``) and the default fast
expit; wall seconds, median of the repeats after one warm-up of each. Ratio = widest clamp /
default clamp. The outputs are checked against ``predict`` (exact: same bits) on a sample.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _spark import local_session  # noqa: E402  (benchmarks/ is on sys.path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
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
