"""The re-offset stage as a Spark SQL column: predict's bits (exact) or within the fast expit's
ulp bound (exact=False), for every inner map kind, probabilities of exactly 0 and 1, and the
full-range SQL logs it needs; and the output floor of sigmoid and beta maps (issue 26)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlcal._solvers.detmath import det_log1p_array, det_log_array
from mlcal.maps import BetaMap, LinearMap, SigmoidMap, StepMap
from mlcal.maps.offset import OffsetMap

pytest.importorskip("pyspark")


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.int64)


def _maps() -> dict[str, OffsetMap]:
    rng = np.random.default_rng(5)
    t = np.sort(rng.random(40))
    v = np.concatenate([[0.0], np.sort(rng.random(39)), [1.0]])   # bins at exactly 0 and 1
    knots = np.sort(rng.random(30))
    lv = np.concatenate([[0.0], np.sort(rng.random(28)), [1.0]])
    return {
        "step": OffsetMap(StepMap(t, v), 1.7),
        "linear-sigmoid-input": OffsetMap(LinearMap(knots, lv, input_transform="sigmoid"), -2.3),
        "sigmoid-extreme": OffsetMap(SigmoidMap(-700.0, 300.0), 30.0),   # subnormal p
        "beta": OffsetMap(BetaMap(1.3, 0.7, -0.2), -40.5),
    }


def _scores() -> np.ndarray:
    rng = np.random.default_rng(6)
    return np.concatenate([[0.0, 1.0, 0.5, 5e-324, 1e-300, -3.0, 3.0, 0.4286, 0.4287, 2.0 ** -40,
                            1 - 2.0 ** -40], rng.random(60), rng.normal(0, 4, 30)])


def test_offset_column_equals_predict_bit_for_bit_and_fast_within_bound(spark):
    from mlcal.spark import calibrated_column
    from mlcal.spark._expressions import FAST_EXPIT_ULPS

    maps = _maps()
    s = _scores()
    df = spark.createDataFrame(pd.DataFrame({"s": s}))
    # one small plan per map (Spark's analysis grows with it); the exact expit column is the
    # slow part, so the exact column is checked on three maps and the fast one on two others
    for name, m in maps.items():
        source = m.to_dict() if name == "beta" else m
        exact = name != "linear-sigmoid-input"
        fast = name in ("linear-sigmoid-input", "sigmoid-extreme")
        cols = ([calibrated_column(source, "s", exact=True).alias("p")] if exact else []) + \
            ([calibrated_column(m, "s", exact=False).alias("fast")] if fast else [])
        out = df.select("s", *cols).toPandas()
        assert np.array_equal(_bits(out["s"]), _bits(s))
        expected = m(s)
        if exact:
            assert np.array_equal(_bits(out["p"]), _bits(expected)), name
        if fast:
            got = out["fast"].to_numpy()
            edge = (expected == 0.0) | (expected == 1.0)
            assert edge.any() or name == "sigmoid-extreme"
            assert np.array_equal(got[edge], expected[edge]), name
            ulps = np.abs(got - expected)[~edge] / np.spacing(expected[~edge])
            assert ulps.max() <= FAST_EXPIT_ULPS, name
    # the cases the maps are meant to reach
    step = maps["step"](s)
    assert (step == 0.0).any() and (step == 1.0).any()
    assert (maps["sigmoid-extreme"].inner(s) < 2.3e-308).any()


def test_full_range_log_columns_are_detmath_logs(spark):
    from mlcal.spark._expressions import log1p_column, log_column

    rng = np.random.default_rng(7)
    p = np.concatenate([[5e-324, 1e-320, 2.0 ** -1022, np.nextafter(2.0 ** -1022, 0), 0.5,
                         1 - 2.0 ** -53, 2.0 ** -53, 0.75],
                        10.0 ** rng.uniform(-323, 0, 150), 1 - 10.0 ** rng.uniform(-16, 0, 150)])
    p = p[(p > 0) & (p < 1)]
    df = spark.createDataFrame(pd.DataFrame({"p": p}))
    out = df.select(log_column(df["p"], full_range=True).alias("l"),
                    log1p_column(-df["p"], full_range=True).alias("l1")).toPandas()
    assert np.array_equal(_bits(out["l"]), _bits(det_log_array(p)))
    assert np.array_equal(_bits(out["l1"]), _bits(det_log1p_array(-p)))


# -- the output floor of parametric maps (issue 26; shares this module's Spark session) --------
def test_floored_maps_equal_predict_bit_for_bit(spark):
    from mlcal.spark import calibrated_column

    rng = np.random.default_rng(8)
    s = np.concatenate([[0.0, 1.0, 2.0 ** -40, 0.5, -30.0, 30.0], rng.random(60),
                        rng.normal(0.0, 4.0, 30)])
    df = spark.createDataFrame(pd.DataFrame({"s": s}))
    maps = {"sigmoid": SigmoidMap(-30.0, 3.0, 1.0 / 1202.0),
            "beta": BetaMap(3.0, 2.5, 0.1, 1.0 / 402.0)}
    out = df.select(*[calibrated_column(m, "s", exact=True).alias(k)
                      for k, m in maps.items()]).toPandas()
    for name, m in maps.items():
        want = m(s)
        assert ((want == m.floor) | (want == 1.0 - m.floor)).any(), name   # the clip acts
        got = out[name].to_numpy(dtype=np.float64)
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), name
