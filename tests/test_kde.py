"""KDE calibrator against the direct Nadaraya-Watson formula (arXiv 1401.3390 §4; see
docs/kde.md)."""

import numpy as np
import pytest

from mlcal._solvers.nadaraya_watson import GaussianNW
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators.kde import KDECalibrator
from mlcal.maps import LinearMap, StepMap


def direct_boxcar(X, Y, W, h, q, closed_ends="rounded"):
    """sum w y [window] / sum w [window]; NaN where the window is empty."""
    q = np.asarray(q)[:, None]
    if closed_ends == "rounded":
        inside = (q >= (X - h)[None, :]) & (q <= (X + h)[None, :])
    else:
        inside = np.abs(q - X[None, :]) <= h
    den = (inside * W).sum(1)
    num = (inside * W * Y).sum(1)
    return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def direct_gaussian(X, Y, W, h, q):
    out = []
    for chunk in np.array_split(np.asarray(q), max(1, len(q) // 400)):
        d = (chunk[:, None] - X[None, :]) / h
        logk = -0.5 * d * d
        k = W * np.exp(logk - logk.max(1, keepdims=True))   # stable far from the data
        out.append((k * Y).sum(1) / k.sum(1))
    return np.concatenate(out)


def data(n=1500, seed=0, ties=False, gap=False):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 5, n)
    if gap:
        s[: n // 3] += 0.9            # an empty stretch of about 0.3 between two clusters
    if ties:
        s = np.round(s, 2)
    y = (rng.random(n) < np.clip(s, 0, 1) ** 0.7).astype(float)
    w = rng.integers(1, 4, n).astype(float)
    return s, y, w


def test_silverman_bandwidth():
    s, y, w = data(seed=1)
    cal = KDECalibrator().fit(s, y)
    assert cal.bandwidth_ == pytest.approx(1.06 * np.std(s, ddof=1) * len(s) ** -0.2, rel=1e-12)
    # integer weights are repeated rows
    weighted = KDECalibrator().fit(s, y, sample_weight=w)
    rep = np.repeat(s, w.astype(int))
    assert weighted.bandwidth_ == pytest.approx(1.06 * np.std(rep, ddof=1) * len(rep) ** -0.2,
                                                rel=1e-12)
    grid = np.linspace(-0.1, 1.1, 3001)
    np.testing.assert_allclose(weighted.predict(grid),
                               KDECalibrator().fit(rep, np.repeat(y, w.astype(int))).predict(grid),
                               atol=1e-12)


@pytest.mark.parametrize("ties,weighted", [(False, False), (True, False), (True, True)])
@pytest.mark.usefixtures("without_output_floor")
def test_boxcar_step_map_equals_direct_formula_everywhere(ties, weighted):
    s, y, w = data(ties=ties, seed=2)
    w = w if weighted else np.ones_like(s)
    cal = KDECalibrator().fit(s, y, sample_weight=w)
    h = cal.bandwidth_
    assert isinstance(cal.map_, StepMap)
    X = np.unique(s)
    rng = np.random.default_rng(0)
    # random points and every window end together with its neighbouring doubles
    ends = np.concatenate([X - h, X + h])
    q = np.concatenate([rng.uniform(X[0] - h, X[-1] + h, 5000), ends,
                        np.nextafter(ends, np.inf), np.nextafter(ends, -np.inf)])
    expect = direct_boxcar(s, y, w, h, q)
    empty = np.isnan(expect)            # only just outside the outermost window ends
    assert empty.sum() == 2 and (q[empty] < X[0] - h).sum() == 1
    np.testing.assert_allclose(cal.predict(q[~empty]), expect[~empty], rtol=0, atol=1e-12)
    # the textbook |x - X_i| <= h differs from the rounded ends only on a measure-zero set
    r = rng.uniform(X[0] - h, X[-1] + h, 5000)
    np.testing.assert_allclose(cal.predict(r), direct_boxcar(s, y, w, h, r, "abs"), atol=1e-12)


@pytest.mark.usefixtures("without_output_floor")
def test_paper_equation_5_with_one_bandwidth_on_balanced_data():
    # Eq. (5) with h0 = h1 = h and m = n positives/negatives is Nadaraya-Watson
    rng = np.random.default_rng(3)
    s = np.concatenate([rng.beta(2, 4, 400), rng.beta(4, 2, 400)])
    y = np.repeat([0.0, 1.0], 400)
    cal = KDECalibrator().fit(s, y)
    h = cal.bandwidth_
    q = rng.uniform(0.05, 0.95, 3000)
    k = np.abs(q[:, None] - s[None, :]) <= h
    m = n = 400
    pos = (k & (y == 1)).sum(1)
    neg = (k & (y == 0)).sum(1)
    eq5 = n * h * pos / (n * h * pos + m * h * neg)
    np.testing.assert_allclose(cal.predict(q), eq5, atol=1e-12)


@pytest.mark.usefixtures("without_output_floor")
def test_empty_windows_take_the_nearest_training_label():
    s, y, w = data(gap=True, seed=4)
    h = 0.01
    cal = KDECalibrator(bandwidth=h).fit(s, y, sample_weight=w)
    X, ybar, _ = sort_and_collapse(s, y, w)
    assert cal.n_gaps_ >= 1
    rng = np.random.default_rng(1)
    q = np.concatenate([rng.uniform(-1, 2.5, 8000), [-50.0, 50.0]])
    direct = direct_boxcar(s, y, w, h, q)
    empty = np.isnan(direct)
    assert empty.sum() > 500
    # nearest unique training score; the larger one wins an exact tie (never hit at random)
    pos = np.clip(np.searchsorted(X, q[empty]), 1, X.size - 1)
    left_nearer = (q[empty] - X[pos - 1]) < (X[pos] - q[empty])
    nearest = np.where(left_nearer, pos - 1, pos)
    np.testing.assert_allclose(cal.predict(q[empty]), ybar[nearest], atol=1e-12)
    np.testing.assert_allclose(cal.predict(q[~empty]), direct[~empty], atol=1e-12)


@pytest.mark.parametrize("ties,gap,bandwidth", [(False, False, "silverman"),
                                                (True, True, "silverman"),
                                                (False, True, 0.004)])
def test_gaussian_grid_error_bound_holds(ties, gap, bandwidth):
    s, y, w = data(n=1200, ties=ties, gap=gap, seed=5)
    cal = KDECalibrator(kernel="gaussian", bandwidth=bandwidth).fit(s, y, sample_weight=w)
    assert isinstance(cal.map_, LinearMap)
    h = cal.bandwidth_
    assert 0 < cal.grid_error_ <= 1e-4
    lo, hi = s.min(), s.max()
    q = np.concatenate([np.random.default_rng(6).uniform(lo, hi, 20000), np.unique(s)])
    err = np.abs(cal.predict(q) - direct_gaussian(s, y, w, h, q)).max()
    assert err <= 1e-4
    # outside the training range the map holds the end values
    ends = direct_gaussian(s, y, w, h, np.array([lo, hi]))
    np.testing.assert_allclose(cal.predict([lo - 1.0, hi + 1.0]), ends, atol=1e-4)


def test_gaussian_tighter_tolerance_is_honoured():
    s, y, w = data(n=800, seed=7)
    loose = KDECalibrator(kernel="gaussian").fit(s, y)
    tight = KDECalibrator(kernel="gaussian", grid_tol=1e-7).fit(s, y)
    assert tight.map_.knots.size > loose.map_.knots.size and tight.grid_error_ <= 1e-7
    q = np.random.default_rng(0).uniform(s.min(), s.max(), 5000)
    err = np.abs(tight.predict(q) - direct_gaussian(s, y, np.ones_like(s), tight.bandwidth_, q))
    assert err.max() <= 1e-6


def test_fast_gauss_transform_matches_the_direct_sum():
    s, y, w = data(n=1500, gap=True, seed=8)
    X, ybar, wsum = sort_and_collapse(s, y, w)
    for h in (0.002, 0.03, 0.5):
        nw = GaussianNW(X, ybar, wsum, h)
        # near the data, inside the gap and far outside it (the direct fallback)
        q = np.concatenate([np.random.default_rng(1).uniform(-0.5, 2.5, 3000), [-40.0, 60.0]])
        np.testing.assert_allclose(nw(q), direct_gaussian(s, y, w, h, q), rtol=0, atol=1e-9)


@pytest.mark.parametrize("kernel", ["boxcar", "gaussian"])
def test_zero_spread_falls_back_to_the_base_rate(kernel):
    y = np.array([1, 0, 0, 1, 0, 0, 0, 1], dtype=float)
    w = np.arange(1, 9, dtype=float)
    cal = KDECalibrator(kernel=kernel).fit(np.full(8, 0.4), y, sample_weight=w)
    assert cal.bandwidth_ == 0.0
    np.testing.assert_allclose(cal.predict([-3.0, 0.4, 7.0]), np.dot(w, y) / w.sum(), atol=1e-15)


def test_raw_scores_are_used_as_given_and_scale_cancels():
    rng = np.random.default_rng(9)
    f = rng.normal(0, 2, 2000)
    y = (rng.random(2000) < 1 / (1 + np.exp(-f))).astype(float)
    cal = KDECalibrator().fit(f, y)
    assert cal.map_.input_transform == "identity" and f.min() < -4
    scaled = KDECalibrator().fit(10 * f + 3, y)
    assert scaled.bandwidth_ == pytest.approx(10 * cal.bandwidth_, rel=1e-12)
    q = rng.uniform(-6, 6, 3000)
    np.testing.assert_allclose(scaled.predict(10 * q + 3), cal.predict(q), atol=1e-12)


@pytest.mark.parametrize("kernel", ["boxcar", "gaussian"])
def test_json_round_trip(kernel):
    s, y, _ = data(n=600, seed=10)
    cal = KDECalibrator(kernel=kernel, bandwidth=0.05).fit(s, y)
    back = KDECalibrator.from_json(cal.to_json())
    q = np.concatenate([np.linspace(-1, 2, 5001), s])
    assert np.array_equal(back.predict(q), cal.predict(q))
    assert back.get_params() == cal.get_params()


@pytest.mark.parametrize("params,match", [({"kernel": "epanechnikov"}, "kernel"),
                                          ({"bandwidth": "scott"}, "bandwidth"),
                                          ({"bandwidth": 0.0}, "bandwidth"),
                                          ({"bandwidth": -1}, "bandwidth"),
                                          ({"grid_tol": 0}, "grid_tol")])
def test_bad_parameters_are_named(params, match):
    s, y, _ = data(n=50)
    with pytest.raises(ValueError, match=match):
        KDECalibrator(**params).fit(s, y)


@pytest.mark.usefixtures("without_output_floor")
def test_silverman_needs_total_weight_above_one():
    with pytest.raises(ValueError, match="total sample weight"):
        KDECalibrator().fit([0.2, 0.6], [0, 1], sample_weight=[0.3, 0.4])
    cal = KDECalibrator(bandwidth=0.1).fit([0.2, 0.6], [0, 1], sample_weight=[0.3, 0.4])
    assert cal.predict([0.1, 0.7]).tolist() == [0.0, 1.0]


@pytest.mark.usefixtures("without_output_floor")
def test_boxcar_windows_of_tiny_weights_after_huge_ones_are_summed_without_cancellation():
    # a window's weight used to be a difference of prefix sums: 16 decades below the prefix it
    # came out as 0 (ZeroDivisionError) or as noise; it must be the direct weighted mean
    rng = np.random.default_rng(31)
    s = np.concatenate([rng.uniform(0.0, 0.5, 800), rng.uniform(0.5, 1.0, 800)])
    y = (rng.random(s.size) < s).astype(float)
    w = np.concatenate([rng.uniform(1e8, 2e8, 800), rng.uniform(1e-8, 2e-8, 800)])
    cal = KDECalibrator(bandwidth=0.02).fit(s, y, sample_weight=w)
    q = rng.uniform(0.0, 1.0, 5000)
    np.testing.assert_allclose(cal.predict(q), direct_boxcar(s, y, w, 0.02, q), rtol=1e-9,
                               atol=0)
    # and with the default (Silverman) bandwidth on weights spanning 16 decades at random:
    # a prefix difference is kept only while it holds >= 2^-26 of its prefix, so its relative
    # error stays below about 2 N 2^-53 2^26 (1.2e-5 for N = 1600)
    w = rng.random(s.size) * 10.0 ** rng.integers(-8, 8, s.size)
    cal = KDECalibrator().fit(s, y, sample_weight=w)
    np.testing.assert_allclose(cal.predict(q), direct_boxcar(s, y, w, cal.bandwidth_, q),
                               rtol=2 * s.size * 2.0 ** -27, atol=0)
