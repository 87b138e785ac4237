"""The segmented map as a Spark SQL column (``mlcal.spark.calibrated_column(...,
segment_columns=...)``): predict's bits (exact=True) or within the fast expit's ulp bound, on
rows with unseen and null segments, one or several typed key columns (64-bit integers beyond
2^53 included), unseen='raise' and mistyped columns failing the job by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import mlcal
from mlcal.maps import BetaMap, StepMap
from mlcal.maps.segmented import SegmentedMap

pytest.importorskip("pyspark")


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.int64)


def _fit(seed: int, **params):
    rng = np.random.default_rng(seed)
    n = 1200
    seg = pd.DataFrame({"country": rng.choice(["FR", "DE", "IT", "l'été \"x\""], n),
                        "tier": rng.integers(-1, 2, n), "flag": rng.random(n) < 0.5})
    s = rng.random(n)
    z = 1.5 * (np.log(s) - np.log1p(-s)) + seg["country"].map(
        {"FR": 0.7, "DE": -0.6, "IT": 0.0, "l'été \"x\"": 0.4}).to_numpy() + 0.3 * seg["tier"]
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(int)
    return mlcal.SegmentedCalibrator(n_folds=None, **params).fit(s, y, seg)


def _rows(seed: int, n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = np.concatenate([[0.0, 1.0, 5e-324, 1e-300, 0.5, 1 - 1e-16], rng.random(n - 6)])
    country = rng.choice(["FR", "DE", "IT", "l'été \"x\"", "PT", None], n,
                         p=[0.25, 0.25, 0.2, 0.15, 0.1, 0.05])
    tier = pd.array(rng.integers(-1, 3, n), dtype="Int64")   # 2: unseen
    tier[rng.random(n) < 0.05] = pd.NA
    return pd.DataFrame({"s": s, "country": country, "tier": tier,
                         "flag": rng.random(n) < 0.5})


def _check(out, expected, exact, name):
    from mlcal.spark._expressions import FAST_EXPIT_ULPS

    got = out.to_numpy(dtype=np.float64)
    if exact:
        assert np.array_equal(_bits(got), _bits(expected)), name
        return
    edge = (expected == 0.0) | (expected == 1.0) | (expected < 2.3e-308)
    assert np.array_equal(got[edge], expected[edge]), name
    ulps = np.abs(got - expected)[~edge] / np.spacing(expected[~edge])
    assert ulps.max() <= FAST_EXPIT_ULPS, (name, ulps.max())


def test_segmented_column_equals_predict(spark):
    from mlcal.spark import calibrated_column

    rows = _rows(1)
    df = spark.createDataFrame(rows[["s", "country", "tier", "flag"]])
    # one plan (Spark's analysis of the exact log/expit dominates the time): slopes and
    # offsets, three typed key columns, exact; the fast path is checked below
    for i, (params, exact) in enumerate([({"method": "isotonic", "min_rows_for_slope": 40},
                                          True)]):
        cal = _fit(i, **params)
        assert (cal.map_.slopes != 1.0).any() == ("min_rows_for_slope" in params)
        expected = cal.predict(rows["s"].to_numpy(), rows[["country", "tier", "flag"]]
                               .astype(object).where(rows[["country", "tier", "flag"]].notna(),
                                                     None))
        source = cal.map_.to_dict()   # a map document works as well as the calibrator
        out = df.select(calibrated_column(source, "s", exact=exact).alias("p")).toPandas()
        _check(out["p"], expected, exact, params)
        q = cal.map_.inner(rows["s"].to_numpy())
        unseen = ~rows["country"].isin(["FR", "DE", "IT", "l'été \"x\""]).to_numpy() | \
            ~rows["tier"].isin([-1, 0, 1]).fillna(False).to_numpy(dtype=bool)
        assert unseen.sum() > 10 and np.array_equal(expected[unseen], q[unseen])
        assert (expected[~unseen] != q[~unseen]).mean() > 0.8


def test_one_column_keys_beyond_2_53_and_renamed_columns(spark):
    from mlcal.spark import calibrated_column

    big = 2 ** 62 + 1
    m = SegmentedMap(BetaMap(1.3, 0.7, -0.2), (("id", "integer"),),
                     ((big,), (big + 2,), (-2 ** 63,), (2 ** 63 - 1,)),
                     [1.0, 0.5, 2.0, 1.0], [0.3, -1.0, 0.0, 2.5])
    rng = np.random.default_rng(2)
    ids = np.array([big, big + 2, big + 1, -2 ** 63, 2 ** 63 - 1, 2 ** 53, 0] * 6,
                   dtype=np.int64)
    x = rng.random(ids.size)
    df = spark.createDataFrame(pd.DataFrame({"score": x, "customer": ids}))
    out = df.select(calibrated_column(m, "score", exact=False, segment_columns=["customer"])
                    .alias("p")).toPandas()
    expected = m(x, pd.DataFrame({"id": ids}))
    _check(out["p"], expected, False, "64-bit keys")
    assert not np.array_equal(expected, m.inner(x))
    # a step map reaching 0 and 1 exactly, boolean keys, the fast path
    step = SegmentedMap(StepMap([0.3, 0.6], [0.0, 0.4, 1.0]), (("b", "boolean"),),
                        ((True,), (False,)), [1.5, 1.0], [2.0, -1.0])
    x = rng.random(50)
    b = rng.random(50) < 0.5
    out = spark.createDataFrame(pd.DataFrame({"s": x, "b": b})).select(
        calibrated_column(step, "s", exact=False).alias("p")).toPandas()
    expected = step(x, pd.DataFrame({"b": b}))
    assert (expected == 0).any() and (expected == 1).any()
    _check(out["p"], expected, False, "step")


def test_unseen_raise_and_mistyped_columns_fail_by_name(spark):
    from pyspark.errors import PySparkException

    from mlcal.spark import calibrated_column
    from mlcal.spark._segmented import segment_index_column

    cal = _fit(4, method="platt", unseen="raise")
    good = pd.DataFrame({"s": [0.2, 0.7], "country": ["FR", "PT"], "tier": [0, 1],
                         "flag": [True, False]})
    with pytest.raises(PySparkException, match="segment \\[PT, 1, false\\].*was not seen"):
        spark.createDataFrame(good).select(calibrated_column(cal, "s").alias("p")).collect()
    # the key lookup alone (the map's arithmetic is checked above): typed as in Python
    m = cal.map_
    cases = {
        "string in an integer column": (good.assign(tier=["0", "1"]),
                                        "'tier': a integer segment column got Spark type "
                                        "string"),
        "1.5 in an integer column": (good.assign(tier=[1.5, 0.0]), "float 1.5 cannot be"),
        "integer in a string column": (good.assign(country=[1, 2]),
                                       "'country': a string segment column got Spark type "
                                       "bigint"),
    }
    for name, (frame, phrase) in cases.items():
        df = spark.createDataFrame(frame)
        with pytest.raises(PySparkException) as err:
            df.select(segment_index_column(m, [df[c] for c in m.column_names])).collect()
        assert phrase in str(err.value), (name, str(err.value)[:500])
    # integral doubles are integer keys, as in Python; nulls and NaN are unseen (-1 there)
    frame = pd.DataFrame({"country": ["FR", "DE", None, "IT"], "tier": [0.0, 1.0, 1.0, np.nan],
                          "flag": [True, False, True, True]})
    df = spark.createDataFrame(frame)
    got = df.select(segment_index_column(m, [df[c] for c in m.column_names]).alias("k")) \
        .toPandas()["k"].fillna(-1).to_numpy()
    shared = SegmentedMap(m.inner, m.columns, m.keys, m.slopes, m.offsets)
    assert got.tolist() == shared.segment_index(frame).tolist()
    assert (got >= 0).sum() == 2
    with pytest.raises(ValueError, match="segment_columns has 1 column"):
        calibrated_column(cal, "s", segment_columns=["country"])
    with pytest.raises(ValueError, match="segment_columns is for segmented maps"):
        calibrated_column(cal.map_.inner, "s", segment_columns=["country"])


@pytest.mark.parametrize("weighted", [False, True])
def test_fit_from_per_segment_statistics_equals_the_in_memory_fit(spark, weighted):
    """mlcal.spark.fit(..., segment_columns=...) aggregates per (segment, score, label) in
    Spark and fits on the counts: the in-memory fit of the same rows (n_folds=None), the
    shared map identical, offsets and slopes to rounding."""
    from mlcal.spark import fit

    rng = np.random.default_rng(9)
    n = 4000
    seg = pd.DataFrame({"country": rng.choice(["FR", "DE", "IT", "ES"], n),
                        "tier": rng.integers(0, 3, n)})
    s = np.round(rng.random(n), 2)   # ties: the aggregation has something to merge
    z = 1.5 * (np.log(s + 0.005) - np.log1p(-s + 0.005)) + seg["country"].map(
        {"FR": 0.7, "DE": -0.6, "IT": 0.0, "ES": 0.3}).to_numpy()
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(int)
    w = rng.integers(1, 4, n).astype(float) * 0.5 if weighted else None
    frame = seg.assign(s=s, y=y, **({"w": w} if weighted else {}))
    params = {"min_rows_for_slope": 300, "slope_alpha": None}   # slopes kept, untested
    got = fit(spark.createDataFrame(frame), "s", "y", "isotonic", "w" if weighted else None,
              segment_columns=["country", "tier"], **params)
    ref = mlcal.SegmentedCalibrator("isotonic", n_folds=None, **params).fit(
        s, y, seg, sample_weight=w)
    assert got.spark_groups_ < n and got.spark_rows_ == n
    assert got.map_.inner.to_dict() == ref.map_.inner.to_dict()
    assert got.map_.keys == ref.map_.keys and got.map_.columns == ref.map_.columns
    # the sums are added in another order, and the REML prior's scale is found by a bounded
    # scalar search to xatol = 1e-10 * (its bracket): that tolerance, amplified by the
    # shrinkage factors, is what separates the two fits (measured: 4e-9 relative)
    np.testing.assert_allclose(got.map_.offsets, ref.map_.offsets, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got.map_.slopes, ref.map_.slopes, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got.offset_mle_, ref.offset_mle_, rtol=1e-9, atol=1e-12)
    assert (ref.map_.slopes != 1.0).any() and np.abs(ref.map_.offsets).max() > 0.2
    assert got.get_params()["n_folds"] is None
    # the default (slopes kept only when Cochran's test finds them unequal): the same test
    # on the same estimates (to rounding), so the same decision
    got = fit(spark.createDataFrame(frame), "s", "y", "isotonic", "w" if weighted else None,
              segment_columns=["country", "tier"])
    ref = mlcal.SegmentedCalibrator("isotonic", n_folds=None).fit(s, y, seg, sample_weight=w)
    assert got.slope_pvalue_ == pytest.approx(ref.slope_pvalue_, rel=1e-7)
    assert got.slopes_tested_out_ == ref.slopes_tested_out_
    np.testing.assert_allclose(got.map_.slopes, ref.map_.slopes, rtol=1e-7, atol=1e-9)


def test_segmented_fit_of_saturated_scores_keeps_the_in_memory_clamp(spark):
    """A shared beta map fitted from per-segment statistics on saturated scores (issue #26:
    many far below 2^-40, exact 0 and 1) takes the in-memory fit's clamp from the same
    distinct scores: the shared map's document is the same, clamp included."""
    from mlcal._solvers.detmath import det_expit_array
    from mlcal.spark import fit

    rng = np.random.default_rng(12)
    n = 1500
    seg = pd.DataFrame({"country": rng.choice(["FR", "DE", "IT"], n)})
    z = np.round(rng.normal(0.0, 200.0, n), 1)
    s = det_expit_array(z)
    s[:4] = [0.0, 1.0, 1e-300, 2.0 ** -1022]
    y = (rng.random(n) < det_expit_array(z / 50.0 + seg["country"].map(
        {"FR": 0.5, "DE": -0.5, "IT": 0.0}).to_numpy())).astype(int)
    got = fit(spark.createDataFrame(seg.assign(s=s, y=y)), "s", "y", "beta",
              segment_columns=["country"])
    ref = mlcal.SegmentedCalibrator("beta", n_folds=None).fit(s, y, seg)
    assert got.spark_groups_ < n
    inner = ref.map_.inner
    assert isinstance(inner, BetaMap) and inner.clamp == (2.0 ** -1022, 1.0 - 2.0 ** -53)
    assert got.map_.inner.to_dict() == inner.to_dict() and "clamp" in inner.to_dict()
