"""mlcal.spark on a real local Spark (JDK + pyspark): exact statistics, grid mode, SQL scoring.

References are independent of the Spark code: the in-memory fit of the very same rows
(``get_calibrator(method).fit``), ``predict``, detmath's expit, and exact rational arithmetic.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from support.synthetic import calibration_set

from mlcal._solvers.detmath import det_expit_array, det_log1p_array, det_log_array
from mlcal._solvers.exact_sums import combine, nonnegative_expansion
from mlcal.calibrators.catalog import available_calibrators, get_calibrator
from mlcal.maps import BETA_EPS, BetaMap, LinearMap, QuadraticMap, SigmoidMap, StepMap


def _frame(spark, **cols):
    # several partitions and a shuffled row order: nothing may depend on either
    return spark.createDataFrame(pd.DataFrame(cols)).repartition(3)


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.int64)


# -- exact sums (pure Python, no Spark) -----------------------------------------------------
def test_nonnegative_expansion_sums_exactly_to_the_combined_value():
    rng = np.random.default_rng(3)
    for _ in range(200):
        w = rng.random(rng.integers(1, 30)) * 10.0 ** rng.integers(-300, 300, 1)
        w = np.append(w, [5e-324, 2.0 ** -1060][: rng.integers(0, 3)])
        mant, exps = [], []
        for v in w:
            m, e = math.frexp(v)                  # v = m 2^e, 0.5 <= m < 1
            e = (max(e - 1, -1022) // 10) * 10    # a class of 10 exponents, as in Spark
            mant.append(int(Fraction(v) / Fraction(2) ** (e - 52)))
            exps.append(e)
        n, k = combine(mant, exps)
        terms = nonnegative_expansion(n, k)
        exact = sum(Fraction(v) for v in w)
        assert sum(Fraction(t) for t in terms) == exact == n * Fraction(2) ** k
        assert all(t > 0 for t in terms) and terms == sorted(terms, reverse=True)
        assert terms[0] == float(exact) or terms[0] < float(exact)   # the largest double below


def test_expansion_of_an_overflowing_sum_is_an_error():
    with pytest.raises(OverflowError):
        nonnegative_expansion(1 << 60, 1000)


# -- data sets ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def data():
    """Tied probability scores, and tied raw margins some of which (> 40) the sigmoid input
    transform maps onto the same value 1.0, so ties are merged again after the transform.
    Weights span 16 decades (several exponent classes per score, where a double sum would
    depend on the order), with zero weights and a score that has only zero weight."""
    s, y = calibration_set(2400, seed=7, decimals=2)
    rng = np.random.default_rng(8)
    margin = np.round(rng.normal(0.0, 3.0, s.size), 1)
    margin[:30] = rng.choice([41.0, 45.5, 50.0, 60.0], 30)
    w = rng.random(s.size) * 10.0 ** rng.integers(-8, 8, s.size)
    w[rng.random(s.size) < 0.03] = 0.0
    whole = rng.random(s.size) < 0.2
    w[whole] = rng.integers(1, 5, int(whole.sum()))    # some integer weights
    s[-1], w[-1] = 0.123456, 0.0
    # the weights are adversarial: some score's float sum changes with the order of its rows
    order_matters = any(np.sum(w[s == v]) != np.sum(w[s == v][::-1]) for v in np.unique(s))
    assert order_matters
    return {"s": s, "margin": margin, "y": y, "w": w}


@pytest.fixture(scope="module")
def stats(spark, data):
    from mlcal.spark._stats import collect_statistics

    df = _frame(spark, **data)
    # driver_rows=0: aggregated in Spark (what larger frames get); None: this small frame's
    # rows are collected as they are
    return {(col, weighted, where): collect_statistics(
                df, col, "y", "w" if weighted else None,
                driver_rows=0 if where == "spark" else None)
            for col in ("s", "margin") for weighted in (False, True)
            for where in ("spark", "driver")}


@pytest.mark.parametrize("method", available_calibrators())
@pytest.mark.parametrize("col", ["s", "margin"])
@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "weights"])
@pytest.mark.parametrize("where", ["spark", "driver"])
def test_spark_statistics_fit_every_method_to_the_same_json_bytes(data, stats, method, col,
                                                                  weighted, where):
    st = stats[(col, weighted, where)]
    w = data["w"] if weighted else None
    expected = get_calibrator(method).fit(data[col], data["y"], w).to_json()
    got = get_calibrator(method).fit(st.scores, st.labels, st.weights).to_json()
    assert got == expected
    assert st.grid is None and st.n_rows == data["s"].size
    assert st.n_distinct == np.unique(data[col]).size
    if where == "spark":
        assert st.n_aggregated <= st.n_distinct * (2 if not weighted else 2 * 40)
    else:
        assert st.n_aggregated == st.n_rows


def test_public_fit_matches_the_in_memory_fit_with_parameters(spark, data):
    import mlcal.spark

    df = _frame(spark, **data)
    cal = mlcal.spark.fit(df, "margin", "y", "isotonic", weight_col="w", interpolate=False)
    expected = get_calibrator("isotonic", interpolate=False).fit(
        data["margin"], data["y"], data["w"]).to_json()
    assert cal.to_json() == expected
    assert cal.spark_statistics_.n_rows == data["s"].size
    template = get_calibrator("platt", smooth_targets=False)
    cal = mlcal.spark.fit(df, "s", "y", template)
    assert cal.to_json() == template.fit(data["s"], data["y"]).to_json()


def _saturated_data():
    """Naive-Bayes-like scores: log-odds over hundreds, so many scores lie far below 2^-40
    (subnormals and exact 0 among them) or round to 1; tied scores; weights with zeros."""
    rng = np.random.default_rng(27)
    z = np.round(rng.normal(0.0, 250.0, 600), 1)
    y = (rng.random(z.size) < det_expit_array(z / 60.0)).astype(np.float64)
    s = det_expit_array(z)
    s[:6] = [0.0, 1.0, 1e-300, 2.0 ** -1022, 5e-324, 1.0 - 2.0 ** -53]
    w = rng.random(s.size) * 10.0 ** rng.integers(-4, 4, s.size)
    w[rng.random(s.size) < 0.05] = 0.0
    w[2:5] = 0.0      # the smallest positive scores have no weight: the fit's lo ignores them
    return s, y, w


@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "weights"])
def test_spark_fit_of_saturated_scores_takes_the_same_clamp(spark, weighted):
    """The beta family's clamp comes from the calibration scores (issue #26): the Spark
    statistics (aggregated in Spark and collected as they are) give the in-memory fit's JSON
    bytes, clamp included, and the column of the fitted calibrator is predict's to the bit
    on saturated scores."""
    import mlcal.spark
    from mlcal.calibrators.output_floor import represented_rows
    from mlcal.spark import calibrated_column
    from mlcal.spark._stats import collect_statistics

    s, y, w = _saturated_data()
    df = _frame(spark, s=s, y=y, w=w)
    wcol = "w" if weighted else None
    # aggregated in Spark (what a frame above max_distinct rows gets; fitted as
    # mlcal.spark.fit does), and through the public fit (this small frame's rows as they are)
    aggregated = collect_statistics(df, "s", "y", wcol, driver_rows=0)
    assert aggregated.n_aggregated < s.size
    probes = np.concatenate([SATURATED, s[:50], np.logspace(-320, -1, 200),
                             1.0 - np.logspace(-17, -1, 100)])
    clamps, cases = {}, []
    for method in ("beta", "platt-logit", "temperature", "quadratic"):
        expected = get_calibrator(method).fit(s, y, w if weighted else None)
        from_aggregate = get_calibrator(method)
        with represented_rows(aggregated.n_weighted_rows):
            from_aggregate.fit(aggregated.scores, aggregated.labels, aggregated.weights)
        assert from_aggregate.to_json() == expected.to_json(), method
        got = mlcal.spark.fit(df, "s", "y", method, weight_col=wcol)
        assert got.to_json() == expected.to_json(), method
        clamps[method] = expected.map_.clamp
        cases.append((method, got))
    assert all(lo < BETA_EPS and hi > 1.0 - BETA_EPS for lo, hi in clamps.values()), clamps
    # with weights, lo is the smallest positive score of positive weight (not 2^-1022)
    assert all((lo > 2.0 ** -1022) == weighted for lo, _ in clamps.values()), clamps
    if weighted:
        return   # the columns of the same map kinds and clamp route: checked once (counts)
    pdf = spark.createDataFrame(pd.DataFrame({"s": probes}))
    out = pdf.select("s", *[calibrated_column(c, "s", exact=True).alias(k)
                            for k, c in cases]).toPandas()
    assert np.array_equal(_bits(out["s"]), _bits(probes))
    for name, cal in cases:
        assert np.array_equal(_bits(out[name]), _bits(cal.predict(probes))), name


def test_auto_on_few_distinct_scores_splits_the_same_rows_as_in_memory(spark):
    # four distinct scores: auto's folds deal rows, from the counts per score and label,
    # which Spark's statistics hold exactly
    import mlcal.spark

    rng = np.random.default_rng(12)
    s = rng.choice([0.1, 0.2, 0.3, 0.9], size=3000)
    y = (rng.random(s.size) < np.where(s < 0.25, 0.1, 0.7)).astype(int)
    cal = mlcal.spark.fit(_frame(spark, s=s, y=y), "s", "y", "auto")
    assert cal.selection_["fold_unit"] == "rows"
    assert cal.to_json() == get_calibrator("auto").fit(s, y).to_json()


@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "weights"])
def test_auto_on_aggregated_rows_gives_its_fold_fits_their_own_floor(spark, weighted):
    # the lowest scores carry no positive, so isotonic's fold fits reach the output floor: a
    # fold's floor is its own training rows' (as in memory), not that of every row the
    # aggregate stands for (which only the refit on all rows gets)
    import mlcal.spark
    from mlcal.calibrators.output_floor import data_floor

    rng = np.random.default_rng(3)
    s = np.round(rng.random(400), 2)
    y = (rng.random(s.size) < s ** 3).astype(int)
    w = rng.integers(1, 4, s.size) * 0.5 if weighted else None
    df = _frame(spark, s=s, y=y, **({} if w is None else {"w": w}))
    cal = mlcal.spark.fit(df, "s", "y", "auto", weight_col=None if w is None else "w",
                          max_distinct=150)
    assert cal.spark_statistics_.n_aggregated < s.size             # rows were aggregated
    expected = get_calibrator("auto").fit(s, y, w)
    assert cal.to_json() == expected.to_json()
    ones = np.ones(s.size)
    iso = get_calibrator("isotonic").fit(s, y, w)                      # the floor binds
    assert float(np.min(iso.predict(s))) == data_floor(ones if w is None else w)


def _jobs(spark, run) -> int:
    """The number of Spark jobs ``run()`` starts."""
    sc = spark.sparkContext
    group = f"mlcal-test-{np.random.default_rng().integers(1 << 62)}"
    sc.setJobGroup(group, "counted")
    try:
        run()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup(group))


def test_a_materialised_cache_is_collected_without_a_count_job(spark):
    # a cached frame's plan knows its row count: one job (the Arrow collection); a frame whose
    # size Spark does not know yet is counted first; a cached frame above the limit is
    # aggregated in Spark without being collected
    import mlcal.spark
    from mlcal.spark._stats import _known_row_bound, collect_statistics

    s, y = calibration_set(1500, seed=13, decimals=2)
    expected = get_calibrator("isotonic").fit(s, y).to_json()
    plain = _frame(spark, y=y, s=s)       # another plan (the cache serves equal plans too)
    cached = _frame(spark, s=s, y=y).cache()
    assert _known_row_bound(cached) is None          # not materialised yet: no trusted count
    cached.count()
    try:
        assert _known_row_bound(cached) == s.size
        assert _known_row_bound(cached.select("s").filter("s > 0.5")) == s.size   # a bound
        assert _known_row_bound(plain) is None
        assert _known_row_bound(spark.range(77).selectExpr("id * 2 AS x")) == 77
        fits = {}
        assert _jobs(spark, lambda: fits.update(c=mlcal.spark.fit(cached, "s", "y"))) == 1
        # the count, then the collection (each with its shuffle stage under AQE)
        assert _jobs(spark, lambda: fits.update(p=mlcal.spark.fit(plain, "s", "y"))) >= 2
        assert fits["c"].to_json() == fits["p"].to_json() == expected
        assert fits["c"].spark_statistics_.n_aggregated == s.size
        st = collect_statistics(cached, "s", "y", max_distinct=1000)    # 1500 rows > 1000
        assert st.n_rows == s.size and st.n_aggregated < s.size and st.grid is None
        assert get_calibrator("isotonic").fit(st.scores, st.labels, st.weights).to_json() \
            == expected
    finally:
        cached.unpersist()


# -- grid mode ------------------------------------------------------------------------------
def test_grid_fit_is_the_exact_fit_of_the_rounded_scores_and_its_bound_holds(spark):
    import mlcal.spark
    from mlcal.spark import ScoreGridWarning

    s, y = calibration_set(3000, seed=11, power=1.5)          # 3000 distinct scores
    df = _frame(spark, s=s, y=y)
    with pytest.warns(ScoreGridWarning, match="3000 distinct scores exceed max_distinct=200"):
        cal = mlcal.spark.fit(df, "s", "y", "isotonic", max_distinct=200)
    g = cal.spark_statistics_.grid
    assert g.representatives.size == 200
    rounded = g.representatives[np.searchsorted(g.edges, s, side="right")]
    assert np.max(np.abs(rounded - s)) <= g.max_shift
    assert g.max_shift <= 0.5 * (s.max() - s.min()) / 200 * (1 + 1e-12)
    # exactly the in-memory fit of the rounded rows
    assert cal.to_json() == get_calibrator("isotonic").fit(rounded, y).to_json()
    # the stated bound: |f(s) - f(midpoint of s's cell)| <= grid_error_, on a dense sweep
    sweep = np.linspace(s.min(), s.max(), 200_001)
    mid = g.representatives[np.searchsorted(g.edges, sweep, side="right")]
    gap = np.abs(cal.predict(sweep) - cal.predict(mid))
    assert gap.max() <= cal.grid_error_
    assert gap.max() >= 0.5 * cal.grid_error_    # and it is not a loose bound here


def _saturated_grid_data():
    """1500 naive-Bayes-like scores (log-odds over hundreds: subnormals, exact 0 and 1, many
    below 2^-40 or within 2^-40 of 1) with weights (zeros among the most extreme scores), and
    raw margins down to -800 (below the sigmoid's last positive value at -745.13...)."""
    rng = np.random.default_rng(31)
    z = rng.normal(0.0, 250.0, 1500)
    y = (rng.random(z.size) < det_expit_array(z / 60.0)).astype(np.float64)
    s = det_expit_array(z)
    s[:6] = [0.0, 1.0, 1e-300, 2.0 ** -1022, 5e-324, 1.0 - 2.0 ** -53]
    w = rng.random(s.size) + 0.5
    w[np.argsort(s)[3:9]] = 0.0       # the weight-0 rows do not count for the clamp
    margin = np.clip(z, -800.0, 50.0)
    return s, margin, y, w


@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "weights"])
def test_grid_fit_takes_the_clamp_of_the_rows_not_of_the_cell_midpoints(spark, weighted):
    """Grid mode (issue #26): every logit-family fit, auto's included, gets the clamp the
    in-memory fit takes from the raw scores (``data_clamp`` of the rows of positive weight),
    aggregated exactly; the map is the fit of the rounded rows under that clamp, and
    ``|f(s) - f(r(s))| <= grid_error_`` holds on every row."""
    import mlcal.spark
    from mlcal.maps.binary import data_clamp, rounded_scores_clamp
    from mlcal.spark import ScoreGridWarning

    s, margin, y, w = _saturated_grid_data()
    df = _frame(spark, s=s, margin=margin, y=y, w=w)
    wcol, weights = ("w", w) if weighted else (None, None)
    carries = w > 0 if weighted else np.ones(s.size, dtype=bool)
    expected = data_clamp(s[carries])                 # the in-memory rule on the raw scores
    assert expected[0] < 1e-299 and expected[1] > 1.0 - 2.0 ** -52
    auto = get_calibrator("auto", candidates=["quadratic", "beta", "platt-logit"])
    for method in ("beta", "platt-logit", "temperature", "quadratic", auto):
        with pytest.warns(ScoreGridWarning):
            cal = mlcal.spark.fit(df, "s", "y", method, weight_col=wcol, max_distinct=60)
        st = cal.spark_statistics_
        assert st.grid is not None and st.clamps["identity"] == expected
        assert cal.map_.clamp == expected, method
        # the default grid refines its first and last cell by binades down to the clamp
        g = st.grid
        assert g.uniform_cells == 60 and g.edges.size == 59 + g.low_edges.size + \
            g.high_edges.size
        assert g.low_edges.size > 900 and g.high_edges.size > 40
        assert np.all(np.frexp(g.low_edges)[0] == 0.5)                  # powers of two
        assert np.all(np.frexp(1.0 - g.high_edges)[0] == 0.5)
        assert g.low_edges[0] <= expected[0] and 1.0 - g.high_edges[-1] <= 1.0 - expected[1]
        # the midpoints alone would not give the rows' clamp
        assert data_clamp(st.scores[st.weights > 0]) != expected
        # the map is the fit of the rows rounded in numpy (so Spark found every row's cell)
        # under the rows' clamp
        rounded = g.representatives[np.searchsorted(g.edges, s, side="right")]
        reference = get_calibrator(method) if isinstance(method, str) else method
        with rounded_scores_clamp({"identity": expected}):
            reference.fit(rounded, y, weights)
        assert cal.to_json() == reference.to_json()
        assert np.all(np.abs(cal.predict(s) - cal.predict(rounded)) <= cal.grid_error_)
    # margins: beta squashes them (sigmoid input transform), lo from the squashed raw scores
    with pytest.warns(ScoreGridWarning):
        cal = mlcal.spark.fit(df, "margin", "y", "beta", weight_col=wcol, max_distinct=60)
    in_memory = get_calibrator("beta").fit(margin, y, weights)
    assert in_memory.map_.clamp[0] < 1e-200
    assert cal.map_.clamp == in_memory.map_.clamp


def test_binade_refinement_of_the_default_grid():
    from mlcal.maps.binary import DEFAULT_CLAMP
    from mlcal.spark._grid import make_grid

    plain = make_grid(100, 0.0, 1.0)
    same = make_grid(100, 0.0, 1.0, refine=DEFAULT_CLAMP)       # no saturation: unchanged
    assert np.array_equal(plain.edges, same.edges) and same.low_edges.size == 0
    g = make_grid(100, 0.0, 1.0, refine=(3e-20, 1.0 - 1e-15))
    # 2^-7 < 1/100 (the first equal edge) down to 2^-65 <= 3e-20 < 2^-64; 1 - 2^-7 .. 1 - 2^-50
    assert np.array_equal(g.low_edges, np.ldexp(1.0, -np.arange(65, 6, -1)))
    assert np.array_equal(g.high_edges, 1.0 - np.ldexp(1.0, -np.arange(7, 51)))
    assert np.array_equal(g.edges, np.unique(np.concatenate(
        [plain.edges, g.low_edges, g.high_edges])))
    assert g.uniform_cells == 100 and g.representatives.size == 100 + 59 + 44
    # a binade cell's midpoint: 3/4 of its upper edge; max_shift is still the widest half-cell
    assert g.representatives[1] == 0.75 * 2.0 ** -64 and g.max_shift == plain.max_shift
    top = make_grid(100, 0.2, 1.0 - 2.0 ** -53, refine=(BETA_EPS, 1.0 - 2.0 ** -53))
    assert top.low_edges.size == 0 and top.high_edges[-1] == 1.0 - 2.0 ** -53


def test_the_sigmoid_limits_of_the_clamp_aggregates():
    # the scores beyond which the sigmoid input transform gives exactly 0 / exactly 1
    from mlcal.spark._stats import sigmoid_limits

    _SIGMOID_ZERO, _SIGMOID_ONE = sigmoid_limits()

    at = det_expit_array(np.array([_SIGMOID_ZERO, np.nextafter(_SIGMOID_ZERO, 0.0),
                                   _SIGMOID_ONE, np.nextafter(_SIGMOID_ONE, 0.0)]))
    assert at[0] == 0.0 < at[1] and at[2] == 1.0 > at[3]
    below = det_expit_array(np.linspace(-1e4, _SIGMOID_ZERO, 10_001))
    above = det_expit_array(np.linspace(_SIGMOID_ONE, 1e4, 10_001))
    assert np.all(below == 0.0) and np.all(above == 1.0)


def test_grid_fit_of_naive_bayes_scores_keeps_the_in_memory_auc(spark):
    """GaussianNB on breast_cancer (scores down to 1e-30 and below): the default grid's fit
    keeps the held-out AUC of the in-memory fit. (Equal cells alone, with the rows' clamp,
    lost 0.013 here: the beta fit on one midpoint for every saturated score is steep enough
    that the output floor ties the extreme scores.)"""
    from sklearn.datasets import load_breast_cancer
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB

    import mlcal.spark
    from mlcal.spark import ScoreGridWarning

    X, yy = load_breast_cancer(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, yy, test_size=0.6, random_state=0,
                                                  stratify=yy)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, test_size=0.5, random_state=0,
                                                stratify=y_rest)
    nb = GaussianNB().fit(X_tr, y_tr)
    s_cal, s_te = nb.predict_proba(X_cal)[:, 1], nb.predict_proba(X_te)[:, 1]
    inner = s_cal[(s_cal > 0) & (s_cal < 1)]
    assert inner.min() < 1e-30           # saturated
    df = _frame(spark, s=s_cal, y=y_cal)
    for method in ("beta", "quadratic"):
        memory = roc_auc_score(y_te, get_calibrator(method).fit(s_cal, y_cal).predict(s_te))
        with pytest.warns(ScoreGridWarning):
            cal = mlcal.spark.fit(df, "s", "y", method, max_distinct=100)
        assert cal.spark_statistics_.grid is not None
        assert abs(roc_auc_score(y_te, cal.predict(s_te)) - memory) < 0.005, method


@pytest.mark.parametrize("m", [BetaMap(2.0, -0.5, 0.1), BetaMap(-1.5, 3.0, 0.0),
                               BetaMap(1.3, 0.7, -0.2), BetaMap(0.8, 0.8, 0.3, input_transform="sigmoid")],
                         ids=["a>0>b", "b>0>a", "monotone", "sigmoid-input"])
def test_beta_grid_error_is_the_largest_oscillation_in_a_cell(m):
    from mlcal.spark._grid import grid_error, make_grid

    lo, hi = (-1e-3, 1.0 + 1e-3) if m.input_transform == "identity" else (-30.0, 30.0)
    g = make_grid(37, lo, hi)
    sweep = np.linspace(lo, hi, 400_001)
    cell = np.searchsorted(g.edges, sweep, side="right")
    f = m(sweep)
    osc = max(np.ptp(f[cell == k]) for k in range(g.representatives.size))
    # the bound is exact up to the sweep's resolution, including the interior turning point
    assert osc <= grid_error(m, g) <= osc + 1e-4


def test_quadratic_grid_error_sees_a_vertex_far_beyond_the_default_clamp():
    """A clamp taken from saturated scores lets z reach -690: the turning point at z = -105
    (eta = (z + 105)^2 - 5) is a break point of the map, so the grid bound sees the dip."""
    from mlcal.spark._grid import grid_error, make_grid

    m = QuadraticMap(210.0, 1.0, 11_025.0 - 5.0, input_transform="sigmoid",
                     clamp=(1e-300, 1.0 - 2.0 ** -53))
    lo, hi = -700.0, 40.0
    g = make_grid(37, lo, hi)
    sweep = np.linspace(lo, hi, 400_001)
    cell = np.searchsorted(g.edges, sweep, side="right")
    f = m(sweep)
    osc = max(np.ptp(f[cell == k]) for k in range(g.representatives.size))
    assert osc > 0.99
    assert osc <= grid_error(m, g) <= osc + 1e-4


def test_explicit_log_odds_grid_and_no_grid_below_the_limit(spark):
    import mlcal.spark

    s, y = calibration_set(2000, seed=12, decimals=3)
    df = _frame(spark, s=s, y=y)
    edges = det_expit_array(np.linspace(-6.0, 6.0, 121))
    cal = mlcal.spark.fit(df, "s", "y", "platt", grid=edges)
    g = cal.spark_statistics_.grid
    rounded = g.representatives[np.searchsorted(g.edges, s, side="right")]
    assert cal.to_json() == get_calibrator("platt").fit(rounded, y).to_json()
    sweep = np.linspace(s.min(), s.max(), 50_001)
    mid = g.representatives[np.searchsorted(g.edges, sweep, side="right")]
    assert np.max(np.abs(cal.predict(sweep) - cal.predict(mid))) <= cal.grid_error_
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)   # no grid warning below the limit
        exact = mlcal.spark.fit(df, "s", "y", "platt", max_distinct=5000)
    assert exact.spark_statistics_.grid is None
    with pytest.raises(ValueError, match="strictly increasing"):
        mlcal.spark.fit(df, "s", "y", "platt", grid=[0.5, 0.2])


# -- input errors ---------------------------------------------------------------------------
def test_bad_inputs_are_named(spark):
    import mlcal.spark

    pdf = pd.DataFrame({"s": [0.1, 0.2, 0.3, 0.4], "y": [0.0, 1.0, 0.0, 1.0],
                        "w": [1.0, 2.0, 1.0, 1.0], "txt": ["a", "b", "c", "d"]})
    cases = [({"y": [0.0, 1.0, 2.0, 1.0]}, {}, "labels must be 0 or 1"),
             ({"w": [1.0, -2.0, 1.0, 1.0]}, {"weight_col": "w"}, "1 negative"),
             ({"w": [0.0, 2.0, 0.0, 1.0]}, {"weight_col": "w"}, "single class"),
             ({}, {"weight_col": "nope"}, "weight column 'nope' is not in the DataFrame"),
             ({}, {"score_col": "txt"}, "score column 'txt' must be numeric")]
    from mlcal.spark._stats import collect_statistics

    for change, kwargs, message in cases:
        df = spark.createDataFrame(pdf.assign(**change))
        args = {"score_col": "s", "label_col": "y", **kwargs}
        with pytest.raises(ValueError, match=message):
            mlcal.spark.fit(df, method="platt", **args)
        with pytest.raises(ValueError, match=message):   # validated in Spark, as large frames
            collect_statistics(df, **args, driver_rows=0)
    rows = [(0.1, 1.0), (None, 0.0), (float("nan"), 1.0), (float("-inf"), 0.0), (0.3, 0.0)]
    bad = spark.createDataFrame(rows, "s double, y double")
    for driver_rows in (None, 0):
        with pytest.raises(ValueError, match="scores contain 1 null and 2 non-finite"):
            collect_statistics(bad, "s", "y", driver_rows=driver_rows)


# -- the SQL expression ---------------------------------------------------------------------
def _edge_scores(extra, n_random: int = 3000) -> np.ndarray:
    rng = np.random.default_rng(21)
    fixed = [0.0, -0.0, 5e-324, -5e-324, 1e-300, 0.5, 1.0, -1.0, 40.0, -40.0, 40.0000001,
             -40.0000001, 700.0, -700.0, -708.5, -720.0, -744.0, -745.1, -746.0, 1e300, -1e300]
    extra = extra[np.isfinite(extra)]
    return np.concatenate([fixed, extra, np.nextafter(extra, np.inf),
                           np.nextafter(extra, -np.inf), rng.normal(0, 5, n_random),
                           rng.random(n_random), rng.normal(0, 400, n_random // 3)])


def _breaks(m) -> np.ndarray:
    """Where a map's value changes regime, in its input's units (for a map on the sigmoid of
    the score: the logits of its break points)."""
    pts = np.asarray(m.knots if isinstance(m, LinearMap) else m.thresholds
                     if isinstance(m, StepMap) else [BETA_EPS, 1.0 - BETA_EPS, 2.0 ** -12,
                                                     1.0 - 2.0 ** -12, *m.clamp, *SATURATED]
                     if isinstance(m, (BetaMap, QuadraticMap)) else [], dtype=np.float64)
    if m.input_transform == "sigmoid":
        with np.errstate(divide="ignore", invalid="ignore"):
            pts = np.concatenate([pts, np.log(pts / (1 - pts))])
    return pts


#: saturated probability scores (issue #26): below 2^-40 down to the smallest normal double
#: and below, exact 0 and 1, and 1 - 1e-17 (which rounds to 1)
SATURATED = [1e-300, 2.0 ** -1022, np.nextafter(2.0 ** -1022, 1.0), 5e-324, 0.0, 1.0,
             1.0 - 1e-17, 1.0 - 2.0 ** -53, 1e-17, 1e-200, 3e-17]
#: the widest score clamp a map may hold
WIDEST_CLAMP = (2.0 ** -1022, 1.0 - 2.0 ** -53)


def _maps():
    rng = np.random.default_rng(22)
    t = np.sort(rng.random(300))
    v = np.sort(rng.random(301))
    knots = np.sort(np.unique(np.round(rng.random(200), 4)))
    lv = np.clip(np.cumsum(rng.random(knots.size)) / knots.size, 0, 1)
    out = {}
    for tr in ("identity", "sigmoid"):
        out[f"step-{tr}"] = StepMap(t, v, input_transform=tr)
        out[f"linear-{tr}"] = LinearMap(knots, lv, input_transform=tr)
        out[f"sigmoid-{tr}"] = SigmoidMap(-7.3, 2.1, input_transform=tr)
        out[f"beta-{tr}"] = BetaMap(1.3, 0.7, -0.2, input_transform=tr)
    out["beta-opposite-signs"] = BetaMap(2.0, -0.5, 0.1)       # not monotone
    out["beta-steep"] = BetaMap(40.0, 35.0, 3.0)
    out["quadratic-logit"] = QuadraticMap(1.2, -0.06, -1.1, floor=1e-3)
    out["quadratic-sigmoid"] = QuadraticMap(0.9, 0.05, -0.4, input_transform="sigmoid")
    out["quadratic-margin"] = QuadraticMap(1.0, -0.2, 0.3, on="margin")
    out["quadratic-margin-floor"] = QuadraticMap(0.7, 0.01, -2.0, floor=0.01, on="margin")
    out["beta-widest-clamp"] = BetaMap(1.3, 0.7, -0.2, clamp=WIDEST_CLAMP)
    out["beta-clamp-sigmoid"] = BetaMap(0.8, 1.6, 0.1, input_transform="sigmoid",
                                        clamp=(2.0 ** -900, 1.0 - 2.0 ** -50))
    out["beta-steep-clamp"] = BetaMap(400.0, 350.0, 5.0, clamp=(1e-200, 1.0 - 1e-15))
    out["quadratic-widest-clamp"] = QuadraticMap(0.1, -0.014, 0.3, floor=1e-3,
                                                 clamp=WIDEST_CLAMP)
    out["quadratic-clamp-sigmoid"] = QuadraticMap(0.9, 0.05, -0.4, input_transform="sigmoid",
                                                  clamp=(3e-17, 1.0 - BETA_EPS))
    out["one-knot"] = LinearMap([0.3], [0.25])
    out["one-bin"] = StepMap([], [0.75])
    out["steep-sigmoid"] = SigmoidMap(-3.0e3, 1.0)
    return out


def test_calibrated_column_equals_predict_bit_for_bit(spark, data):
    from mlcal.spark import calibrated_column

    maps = _maps()
    # every registered method on probabilities, and those that take raw margins on margins
    fitted = {m: get_calibrator(m).fit(data["s"], data["y"]) for m in available_calibrators()}
    fitted.update({f"{m}-margin": get_calibrator(m).fit(data["margin"], data["y"]) for m in
                   ("isotonic", "histogram", "platt", "elite", "bbq", "kde", "quadratic")})
    assert {type(c.map_) for c in fitted.values()} >= {StepMap, LinearMap, SigmoidMap, BetaMap}
    # one small frame per map: its own break points and their neighbouring doubles, the fixed
    # edge scores and a random sample (the exact expit/log columns are evaluated row by row by
    # Spark's interpreter, so every map on every other map's break points would take minutes);
    # the frames of ten maps go to Spark as one job, each row's `case` picking its map's column
    from pyspark.sql import functions as F

    cases = [(name, m, m) for name, m in maps.items()]
    cases += [(f"fit-{k}", c, c.map_) for k, c in fitted.items()]
    cases.append(("as-dict", maps["linear-sigmoid"].to_dict(), maps["linear-sigmoid"]))
    per_job = 10
    for start in range(0, len(cases), per_job):
        group = cases[start:start + per_job]
        scores = [_edge_scores(_breaks(m), n_random=300) for _, _, m in group]
        df = spark.createDataFrame(pd.concat(
            [pd.DataFrame({"case": i, "s": sc}) for i, sc in enumerate(scores)],
            ignore_index=True))
        p = None
        for i, (_, source, _) in enumerate(group):
            col = calibrated_column(source, df["s"], exact=True)
            p = F.when(df["case"] == i, col) if p is None else p.when(df["case"] == i, col)
        out = df.select("case", "s", p.alias("p")).toPandas()
        for i, (name, source, m) in enumerate(group):
            rows = out[out["case"] == i]
            s = rows["s"].to_numpy()
            assert np.array_equal(_bits(s), _bits(scores[i])), name
            expected = source.predict(s) if hasattr(source, "predict") else m(s)
            assert np.array_equal(_bits(rows["p"]), _bits(expected)), name


def test_log_columns_are_detmath_logs_to_the_bit_on_the_beta_range(spark):
    from mlcal.spark._expressions import log1p_column, log_column

    rng = np.random.default_rng(24)
    s = np.concatenate([rng.random(5000), np.logspace(-12.1, 0, 2000),
                        1.0 - np.logspace(-12.1, -1e-3, 2000), [2.0 ** -12, 1.0 - 2.0 ** -12]])
    s = np.clip(s, BETA_EPS, 1.0 - BETA_EPS)
    s = np.concatenate([s, np.nextafter(s, 0.0), np.nextafter(s, 1.0)])
    df = spark.createDataFrame(pd.DataFrame({"s": s}))
    out = df.select(log_column(df["s"]).alias("l"), log1p_column(-df["s"]).alias("l1"),
                    log1p_column(df["s"] - 1.0).alias("l2")).toPandas()
    assert np.array_equal(_bits(out["l"]), _bits(det_log_array(s)))
    assert np.array_equal(_bits(out["l1"]), _bits(det_log1p_array(-s)))
    assert np.array_equal(_bits(out["l2"]), _bits(det_log1p_array(s - 1.0)))


def test_log_columns_are_detmath_logs_to_the_bit_down_to_the_widest_clamp(spark):
    """A document's clamp may go down to lo = 2^-1022 and up to hi = 1 - 2^-53: the octave
    tables then reach 2^-1022 (log s) and 2^-53 (log1p(-s)); every normal s is exact."""
    from mlcal.spark._expressions import clamp_log_exponents, log1p_column, log_column

    lo, hi = 2.0 ** -1022, 1.0 - 2.0 ** -53
    e_log, e_log1p = clamp_log_exponents(lo, hi)
    assert (e_log, e_log1p) == (-1022, -53)
    assert clamp_log_exponents(BETA_EPS, 1.0 - BETA_EPS) == (-41, -41)   # the default's tables
    rng = np.random.default_rng(26)
    s = np.concatenate([np.exp(rng.uniform(-708.3, 0.0, 4000)), rng.random(2000),
                        1.0 - np.exp(rng.uniform(-36.7, 0.0, 2000)),
                        np.ldexp(1.0, np.arange(-1022, 0)), 1.0 - np.ldexp(1.0, np.arange(-53, 0)),
                        [lo, 1e-300, 2.0 ** -12, 1.0 - 2.0 ** -12, BETA_EPS, 1.0 - BETA_EPS, hi]])
    s = np.clip(np.concatenate([s, np.nextafter(s, 0.0), np.nextafter(s, 1.0)]), lo, hi)
    df = spark.createDataFrame(pd.DataFrame({"s": s}))
    out = df.select(log_column(df["s"], min_exp=e_log).alias("l"),
                    log1p_column(-df["s"], min_exp=e_log1p).alias("l1")).toPandas()
    assert np.array_equal(_bits(out["l"]), _bits(det_log_array(s)))
    assert np.array_equal(_bits(out["l1"]), _bits(det_log1p_array(-s)))


def test_fast_column_is_within_its_stated_ulp_bound(spark):
    from mlcal.spark import calibrated_column
    from mlcal.spark._expressions import FAST_EXPIT_ULPS, fast_expit_column

    rng = np.random.default_rng(25)
    x = np.concatenate([np.linspace(-760, 60, 20001), rng.normal(0, 20, 20000),
                        -np.logspace(-320, 2.9, 3000), np.logspace(-320, 2.9, 3000)])
    df = spark.createDataFrame(pd.DataFrame({"x": x}))
    got = df.select(fast_expit_column(df["x"]).alias("p")).toPandas()["p"].to_numpy()
    exact = det_expit_array(x)
    ulps = np.abs(got - exact) / np.spacing(exact)
    assert ulps.max() <= FAST_EXPIT_ULPS and (got != exact).any()


def test_default_column_is_within_the_bound_on_every_map_kind(spark, data):
    """The default (exact=False) against predict: step and linear maps bit for bit, sigmoid
    and beta maps within FAST_EXPIT_ULPS ulps, on every map kind with both input transforms
    and on every registered method's fitted map."""
    from mlcal.spark import calibrated_column
    from mlcal.spark._expressions import FAST_EXPIT_ULPS

    maps = dict(_maps())
    maps.update({f"fit-{k}": get_calibrator(k).fit(data["s"], data["y"]).map_
                 for k in available_calibrators()})
    maps.update({f"fit-{k}-margin": get_calibrator(k).fit(data["margin"], data["y"]).map_
                 for k in ("platt", "isotonic", "elite")})
    assert {type(m) for m in maps.values()} == {StepMap, LinearMap, SigmoidMap, BetaMap,
                                                QuadraticMap}
    s = _edge_scores(np.array([BETA_EPS, 1.0 - BETA_EPS, 1e-12, 1 - 1e-12]), n_random=600)
    df = spark.createDataFrame(pd.DataFrame({"s": s}))
    out = df.select(*[calibrated_column(m, "s").alias(k) for k, m in maps.items()]).toPandas()
    worst = {}
    for name, m in maps.items():
        p, got = m(s), out[name].to_numpy()
        if isinstance(m, (StepMap, LinearMap)):
            assert np.array_equal(_bits(got), _bits(p)), name
        ulps = np.abs(got - p) / np.spacing(p)
        worst[name] = ulps.max()
        assert worst[name] <= FAST_EXPIT_ULPS, (name, worst[name])
    # the bound is not vacuous: the fast expit does differ from predict on some maps
    assert max(worst.values()) > 0


def test_expit_column_is_detmath_expit_to_the_bit(spark):
    from mlcal.spark._expressions import expit_column

    rng = np.random.default_rng(23)
    x = np.concatenate([np.linspace(-760, 60, 20001), rng.normal(0, 20, 20000),
                        -np.logspace(-320, 2.9, 3000), np.logspace(-320, 2.9, 3000),
                        [0.0, -0.0, 40.0, -40.0, -708.39641853226408, -745.2, -745.13321910194]])
    df = spark.createDataFrame(pd.DataFrame({"x": x}))
    got = df.select(expit_column(df["x"]).alias("p")).toPandas()["p"].to_numpy()
    expected = det_expit_array(x)
    assert np.array_equal(_bits(got), _bits(expected))
    assert (expected[x < -708] > 0).any() and (expected[x < -708] < 2.3e-308).any()  # subnormals


def test_non_finite_and_null_scores_give_null(spark):
    from mlcal.spark import calibrated_column

    m = StepMap([0.5], [0.2, 0.8])
    df = spark.createDataFrame([(0.7,), (None,), (float("nan"),), (float("inf"),),
                                (float("-inf"),)], "s double")
    got = [r[0] for r in df.select(calibrated_column(m, "s")).collect()]
    assert got == [0.8, None, None, None, None]
    with pytest.raises(ValueError, match="non-finite"):
        m(np.array([np.nan]))     # what predict does instead
    with pytest.raises(TypeError, match="fitted binary calibrator, a calibration map"):
        calibrated_column(object(), "s")
