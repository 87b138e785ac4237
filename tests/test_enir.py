"""ENIR and its near-isotonic path, checked against independent oracles.

* the near-isotonic optimum at any lambda: its dual is a box-constrained least-squares problem,
  solved exactly by scipy's BVLS active-set method;
* the end of the path: scikit-learn's IsotonicRegression;
* BIC, weights, smoothing and the folded map: recomputed here in plain numpy from the path
  solutions and the original (expanded) rows, following docs/enir.md ('Scoring', 'Bin
  smoothing', 'Prediction and fold').
"""

import json
import warnings

import numpy as np
import pytest
from scipy.optimize import lsq_linear
from scipy.special import expit
from sklearn.isotonic import IsotonicRegression

from mlcal._solvers.neariso import near_isotonic_path, path_breakpoints, path_solution
from mlcal._solvers.ties import midpoint_cuts
from mlcal.calibrators.enir import ENIR
from mlcal.maps import LinearMap, StepMap


# ------------------------------------------------------------------------------------------
# oracles
# ------------------------------------------------------------------------------------------
def brute_near_isotonic(z, w, lam):
    """argmin 1/2 sum w (p - z)^2 + lam sum (p_i - p_{i+1})_+ through its dual.

    With (Dp)_i = p_i - p_{i+1}: p = z - W^-1 D^T u, where u minimises
    ||W^-1/2 D^T u - W^1/2 z||^2 over the box [0, lam]^(n-1).
    """
    n = z.size
    if n == 1 or lam == 0:
        return z.copy()
    D = np.zeros((n - 1, n))
    D[np.arange(n - 1), np.arange(n - 1)] = 1.0
    D[np.arange(n - 1), np.arange(1, n)] = -1.0
    A = D.T / np.sqrt(w)[:, None]
    c = np.sqrt(w) * z
    u = lsq_linear(A, c, bounds=(0.0, lam), method="bvls", tol=1e-15).x
    return z - (D.T @ u) / w


def objective(p, z, w, lam):
    return 0.5 * np.sum(w * (p - z) ** 2) + lam * np.sum(np.maximum(p[:-1] - p[1:], 0.0))


def random_problem(rng, n, ties=False, weights=False):
    s = rng.integers(0, max(2, n // 3), n) / max(2, n // 3) if ties else rng.random(n)
    y = (rng.random(n) < 0.3 + 0.4 * np.sin(6 * s) ** 2).astype(float)
    y[0], y[-1] = 0.0, 1.0  # both classes
    w = rng.integers(1, 4, n).astype(float) if weights else None
    return s, y, w


def expanded_members(s, y, w, lambdas, smooth=True):
    """Each kept model's smoothed bin value at the unique scores, built from the raw rows."""
    w = np.ones_like(s) if w is None else w
    path = near_isotonic_path(s, y, w)
    x = path.x
    beta = np.clip(np.rint(path_solution(path, lambdas) * 1e6) / 1e6, 0.0, 1.0)
    members = np.empty_like(beta)
    idx = np.searchsorted(x, s)  # unique-score index of every row
    for k in range(beta.shape[0]):
        b = beta[k]
        run = np.concatenate(([0], np.cumsum(b[1:] != b[:-1])))  # bin id per unique score
        row_run = run[idx]
        for r in range(run[-1] + 1):
            rows = row_run == r
            n = w[rows].sum()
            o = np.dot(w[rows], y[rows]) / n
            e = np.dot(w[rows], s[rows]) / n
            c = abs(o - e)
            v = b[run == r][0]
            members[k, run == r] = (v * n + e * (1 - c)) / (n + (1 - c)) if smooth else v
    return x, beta, members


def expanded_bic(s, y, w, beta_rows):
    """BIC over all rows: -2 LL + df (log N + log 2 pi), df = runs of equal rounded values."""
    w = np.ones_like(s) if w is None else w
    out = []
    x = np.unique(s)
    idx = np.searchsorted(x, s)
    for b in beta_rows:
        df = 1 + np.count_nonzero(b[1:] != b[:-1])
        p = b[idx]
        with np.errstate(divide="ignore"):
            ll = np.sum(w[y == 1] * np.log(p[y == 1])) + np.sum(w[y == 0] * np.log(1 - p[y == 0]))
        out.append(-2 * ll + df * (np.log(w.sum()) + np.log(2 * np.pi)))
    return np.array(out)


# ------------------------------------------------------------------------------------------
# the path
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ties,weights", [(False, False), (True, False), (False, True),
                                          (True, True)])
def test_path_is_the_near_isotonic_optimum(ties, weights):
    rng = np.random.default_rng(11 + 2 * ties + weights)
    for _ in range(25):
        n = int(rng.integers(2, 31))
        s, y, w = random_problem(rng, n, ties, weights)
        path = near_isotonic_path(s, y, w)
        lams = path_breakpoints(path.merge_lambdas)
        # every breakpoint plus lambdas in between and beyond the end of the path
        extra = rng.random(6) * lams[-1] * 1.3
        grid = np.sort(np.concatenate((lams, extra)))
        sol = path_solution(path, grid)
        for k, lam in enumerate(grid):
            ref = brute_near_isotonic(path.ybar, path.w, lam)
            np.testing.assert_allclose(sol[k], ref, rtol=0, atol=1e-8)
            assert objective(sol[k], path.ybar, path.w, lam) <= \
                objective(ref, path.ybar, path.w, lam) + 1e-12


def test_kept_models_are_near_isotonic_optima():
    rng = np.random.default_rng(3)
    s, y, w = random_problem(rng, 30, ties=True, weights=True)
    cal = ENIR().fit(s, y, sample_weight=w)
    path = near_isotonic_path(s, y, w)
    assert np.isin(cal.lambdas_, path_breakpoints(path.merge_lambdas)).all()
    assert (cal.lambdas_ > 0).all()
    for lam, p in zip(cal.lambdas_, path_solution(path, cal.lambdas_)):
        np.testing.assert_allclose(p, brute_near_isotonic(path.ybar, path.w, lam), atol=1e-8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_path_ends_at_pava(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    s = np.round(rng.random(n), 2 + seed)  # ties for seeds 0 and 1
    y = (rng.random(n) < s ** 2).astype(float)
    w = rng.random(n) * 2 if seed == 2 else None
    path = near_isotonic_path(s, y, w)
    iso = IsotonicRegression().fit(s, y, sample_weight=w).predict(path.x)
    last = path.merge_lambdas[-1]
    end, beyond = path_solution(path, [last, 10 * last + 1])
    np.testing.assert_allclose(end, iso, atol=1e-10)
    np.testing.assert_allclose(beyond, iso, atol=1e-10)


def test_groups_never_split():
    rng = np.random.default_rng(5)
    for _ in range(10):
        s, y, w = random_problem(rng, 25, ties=True, weights=True)
        path = near_isotonic_path(s, y, w)
        lams = path_breakpoints(path.merge_lambdas)
        # lambdas strictly between breakpoints, where the fused sets are unambiguous
        grid = np.concatenate([np.linspace(a, b, 4)[1:-1] for a, b in zip(lams[:-1], lams[1:])]
                              + [[lams[-1] * 1.5]])
        fused_prev = np.zeros(path.x.size - 1, dtype=bool)
        for lam, p in zip(grid, path_solution(path, grid)):
            ref = brute_near_isotonic(path.ybar, path.w, lam)
            fused_ref = np.abs(np.diff(ref)) < 1e-7
            fused = np.diff(p) == 0.0  # one value per group in the path solution
            np.testing.assert_array_equal(fused, fused_ref)
            assert not (fused_prev & ~fused).any(), "a fused pair split as lambda grew"
            fused_prev = fused
    # every boundary of the merge log is fused exactly once
    assert np.unique(path.merge_boundaries).size == path.merge_boundaries.size


def test_path_matches_the_authors_reference_output():
    """The authors' own mPAVA run (pakdaman/calibration, ENIR/csv/data_z.csv with distinct
    scores; data_lambda.csv and data_beta.csv): breakpoints 0, 0.75, 0.888..., 2.1 and the
    solutions around the only non-monotone stretch (rows 488-512), printed to 15 digits."""
    z = np.array([0] * 491 + [1] * 3 + [0] * 7 + [1] * 4 + [0] + [1] * 3 + [0] + [1] * 490,
                 dtype=float)
    path = near_isotonic_path(np.arange(1000.0), z)
    lams = path_breakpoints(path.merge_lambdas)
    np.testing.assert_allclose(lams, [0, 0.75, 0.888888888888889, 2.1], rtol=0, atol=1e-14)
    a, b, c = 0.107142857142857, 0.703703703703704, 0.126984126984127
    d = 0.777777777777778
    reference = np.array(  # columns: the four breakpoints; rows 491..509
        [[1, .75, b, .3]] * 3 + [[0, a, c, .3]] * 7 + [[1, .8125, d, d]] * 4 + [[0, .75, d, d]]
        + [[1, .75, d, d]] * 3 + [[0, .75, d, d]])
    sol = path_solution(path, lams)
    np.testing.assert_allclose(sol[:, 491:510].T, reference, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(sol[:, :491], 0.0)
    np.testing.assert_array_equal(sol[:, 510:], 1.0)


def test_breakpoints_thinned_evenly_by_index():
    merges = np.repeat(np.arange(1.0, 301.0), 2)  # 300 distinct lambdas, each merged twice
    lams = path_breakpoints(np.concatenate(([0.0, 0.0], merges)), 100)
    full = np.concatenate(([0.0], np.arange(1.0, 301.0)))
    idx = np.round(np.arange(100) / 99 * 300).astype(int)
    np.testing.assert_array_equal(lams, full[idx])
    np.testing.assert_array_equal(path_breakpoints(merges, 400), full)


# ------------------------------------------------------------------------------------------
# the ensemble
# ------------------------------------------------------------------------------------------
def test_bic_df_and_weights_match_the_recipe():
    rng = np.random.default_rng(8)
    s, y, w = random_problem(rng, 400, ties=True, weights=True)
    cal = ENIR().fit(s, y, sample_weight=w)
    path = near_isotonic_path(s, y, w)
    all_lams = path_breakpoints(path.merge_lambdas)
    beta = np.clip(np.rint(path_solution(path, all_lams) * 1e6) / 1e6, 0.0, 1.0)
    bic = expanded_bic(s, y, w, beta)
    keep = np.isfinite(bic)
    keep[0] = False  # lambda = 0 is never used
    np.testing.assert_array_equal(cal.lambdas_, all_lams[keep])
    np.testing.assert_array_equal(cal.df_, [1 + np.count_nonzero(np.diff(b)) for b in beta[keep]])
    np.testing.assert_allclose(cal.bic_, bic[keep], rtol=1e-11)
    rel = np.exp(-(bic[keep] - bic[keep].min()) / 2)
    np.testing.assert_allclose(cal.weights_, rel / rel.sum(), rtol=1e-9, atol=1e-300)
    assert abs(cal.weights_.sum() - 1.0) < 1e-12
    assert cal.n_breakpoints_ == all_lams.size


def test_weights_survive_huge_bic_differences():
    rng = np.random.default_rng(9)
    s = rng.random(20000)
    y = (rng.random(20000) < s).astype(float)
    cal = ENIR().fit(s, y)
    assert np.isfinite(cal.weights_).all() and abs(cal.weights_.sum() - 1.0) < 1e-12
    assert cal.bic_.max() - cal.bic_.min() > 2000  # exp(-1000) underflows without log-space care
    assert cal.weights_[np.argmin(cal.bic_)] == cal.weights_.max()


def test_models_with_infinite_bic_are_dropped():
    # a heavy negative right after a light positive: once they fuse, the bin rounds to 0 while
    # holding a positive, so those models have infinite BIC
    s = np.array([0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    y = np.array([0, 1, 0, 1, 0, 1, 1, 1], dtype=float)
    w = np.array([1, 1, 3e7, 1, 1, 1, 1, 1], dtype=float)
    cal = ENIR().fit(s, y, sample_weight=w)
    path = near_isotonic_path(s, y, w)
    all_lams = path_breakpoints(path.merge_lambdas)
    beta = np.clip(np.rint(path_solution(path, all_lams) * 1e6) / 1e6, 0.0, 1.0)
    bic = expanded_bic(s, y, w, beta)
    assert np.isinf(bic).any() and np.isfinite(bic[1:]).any()
    np.testing.assert_array_equal(cal.lambdas_, all_lams[1:][np.isfinite(bic[1:])])
    assert np.isfinite(cal.bic_).all() and abs(cal.weights_.sum() - 1) < 1e-12


def test_all_models_infinite_falls_back_to_isotonic_end():
    s = np.array([0.1, 0.2])
    y = np.array([1.0, 0.0])
    w = np.array([1.0, 3e7])
    with pytest.warns(RuntimeWarning, match="infinite BIC"):
        cal = ENIR().fit(s, y, sample_weight=w)
    path = near_isotonic_path(s, y, w)
    np.testing.assert_array_equal(cal.lambdas_, path.merge_lambdas[-1:])
    np.testing.assert_array_equal(cal.weights_, [1.0])


@pytest.mark.parametrize("smooth", [True, False])
@pytest.mark.usefixtures("without_output_floor")
def test_folded_linear_map_equals_weighted_average_of_members(smooth):
    rng = np.random.default_rng(21)
    s, y, w = random_problem(rng, 300, ties=True, weights=True)
    cal = ENIR(smooth_bins=smooth).fit(s, y, sample_weight=w)
    assert isinstance(cal.map_, LinearMap)
    x, _, members = expanded_members(s, y, w, cal.lambdas_, smooth)
    q = np.concatenate((rng.uniform(-0.2, 1.2, 2000), x, [x[0] - 1, x[-1] + 1]))
    explicit = sum(wk * np.interp(q, x, m) for wk, m in zip(cal.weights_, members))
    np.testing.assert_allclose(cal.predict(q), explicit, rtol=0, atol=1e-12)


def test_many_models_share_the_weight_on_small_data():
    # with few points several models carry weight, so the averaging itself is exercised
    rng = np.random.default_rng(4)
    s, y, _ = random_problem(rng, 60)
    cal = ENIR().fit(s, y)
    assert np.count_nonzero(cal.weights_ > 1e-3) >= 3
    x, _, members = expanded_members(s, y, None, cal.lambdas_)
    q = rng.uniform(0, 1, 500)
    explicit = sum(wk * np.interp(q, x, m) for wk, m in zip(cal.weights_, members))
    np.testing.assert_allclose(cal.predict(q), explicit, rtol=0, atol=1e-12)


@pytest.mark.usefixtures("without_output_floor")
def test_step_variant_uses_midpoint_cuts():
    rng = np.random.default_rng(22)
    s, y, w = random_problem(rng, 200, ties=True, weights=True)
    cal = ENIR(interpolate=False, smooth_bins=False).fit(s, y, sample_weight=w)
    assert isinstance(cal.map_, StepMap)
    x, _, members = expanded_members(s, y, w, cal.lambdas_, smooth=False)
    mids = 0.5 * (x[1:] + x[:-1])
    q = np.concatenate((rng.uniform(-0.2, 1.2, 2000), x))
    q = q[~np.isin(q, mids)]
    nearest_right = np.searchsorted(mids, q, side="right")  # unique score whose cell holds q
    explicit = sum(wk * m[nearest_right] for wk, m in zip(cal.weights_, members))
    np.testing.assert_allclose(cal.predict(q), explicit, rtol=0, atol=1e-12)
    assert set(cal.map_.thresholds) <= set(mids)


@pytest.mark.usefixtures("without_output_floor")
def test_step_variant_with_coinciding_midpoints():
    # three adjacent doubles whose plain midpoints round to the same value: the shared cut rule
    # (midpoint_cuts) then cuts at the upper score, so every training score keeps its own cell
    a = np.nextafter(0.5, 1.0)
    x = np.array([a, a + np.spacing(a), a + 2 * np.spacing(a)])
    mids = 0.5 * (x[1:] + x[:-1])
    assert mids[0] == mids[1]
    # increasing mean labels 0.2, 0.5, 0.8 at the three scores: distinct values in every model
    s = np.concatenate(([0.1, 0.2, 0.3], np.repeat(x, [5, 2, 5]), [0.7, 0.8, 0.9]))
    y = np.array([0, 0, 1] + [1, 0, 0, 0, 0] + [1, 0] + [1, 1, 1, 1, 0] + [0, 1, 1],
                 dtype=float)
    cal = ENIR(interpolate=False, smooth_bins=False).fit(s, y)
    assert np.all(np.diff(cal.map_.thresholds) > 0)
    xs, _, members = expanded_members(s, y, None, cal.lambdas_, smooth=False)
    all_mids = midpoint_cuts(xs[:-1], xs[1:])
    q = np.concatenate((xs, all_mids, np.linspace(0, 1, 101)))
    explicit = sum(wk * m[np.searchsorted(all_mids, q, side="right")]
                   for wk, m in zip(cal.weights_, members))
    np.testing.assert_allclose(cal.predict(q), explicit, rtol=0, atol=1e-12)


def test_integer_weights_equal_repeated_rows():
    rng = np.random.default_rng(30)
    s, y, _ = random_problem(rng, 150, ties=True)
    w = rng.integers(1, 5, s.size)
    a = ENIR().fit(s, y, sample_weight=w)
    b = ENIR().fit(np.repeat(s, w), np.repeat(y, w))
    np.testing.assert_array_equal(a.map_.knots, b.map_.knots)
    np.testing.assert_allclose(a.map_.values, b.map_.values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.bic_, b.bic_, rtol=1e-12)
    np.testing.assert_array_equal(a.df_, b.df_)


def test_order_of_tied_rows_does_not_matter():
    rng = np.random.default_rng(31)
    s = rng.integers(0, 12, 500) / 12
    y = (rng.random(500) < s).astype(float)
    a = ENIR().fit(s, y)
    perm = rng.permutation(500)
    b = ENIR().fit(s[perm], y[perm])
    q = np.linspace(-0.1, 1.1, 301)
    np.testing.assert_allclose(a.predict(q), b.predict(q), rtol=0, atol=1e-12)
    assert a.map_.knots.size <= 12


def test_all_scores_equal_gives_the_smoothed_mean():
    s = np.full(10, 0.3)
    y = np.array([1, 0, 0, 1, 0, 0, 0, 1, 0, 0], dtype=float)
    cal = ENIR().fit(s, y)
    o, e = 0.3, 0.3  # mean label, mean score
    c = abs(o - e)
    expected = (np.round(o, 6) * 10 + e * (1 - c)) / (10 + 1 - c)
    np.testing.assert_allclose(cal.predict([0.0, 0.3, 1.0]), expected, atol=1e-15)
    np.testing.assert_array_equal(cal.lambdas_, [0.0])


# ------------------------------------------------------------------------------------------
# input transform, serialisation, parameters
# ------------------------------------------------------------------------------------------
def test_raw_scores_get_the_sigmoid():
    rng = np.random.default_rng(40)
    f = rng.normal(0, 3, 500)
    y = (rng.random(500) < expit(f / 2)).astype(float)
    cal = ENIR().fit(f, y)
    assert cal.map_.input_transform == "sigmoid"
    assert cal.map_.domain == (f.min(), f.max())
    ref = ENIR(input_transform="identity").fit(expit(f), y)
    q = rng.normal(0, 4, 300)
    np.testing.assert_allclose(cal.predict(q), ref.predict(expit(q)), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="requires scores in"):
        ENIR(input_transform="identity").fit(f, y)
    assert ENIR().fit(expit(f), y).map_.input_transform == "identity"


@pytest.mark.parametrize("params", [{}, {"interpolate": False}, {"smooth_bins": False,
                                                                  "max_breakpoints": 20}])
def test_json_round_trip(params):
    rng = np.random.default_rng(41)
    s, y, w = random_problem(rng, 300, ties=True, weights=True)
    cal = ENIR(**params).fit(s * 6 - 3, y, sample_weight=w)
    text = cal.to_json()
    back = ENIR.from_json(text)
    assert back.get_params() == cal.get_params()
    assert json.loads(text)["method"] == "enir"
    q = np.linspace(-4, 4, 999)
    np.testing.assert_array_equal(back.predict(q), cal.predict(q))
    assert back.map_ == cal.map_


@pytest.mark.parametrize("params,name", [({"max_breakpoints": 1}, "max_breakpoints"),
                                         ({"max_breakpoints": 2.5}, "max_breakpoints"),
                                         ({"interpolate": "no"}, "interpolate"),
                                         ({"smooth_bins": None}, "smooth_bins"),
                                         ({"input_transform": "logit"}, "input_transform")])
def test_bad_parameters_raise(params, name):
    with pytest.raises(ValueError, match=name):
        ENIR(**params).fit([0.1, 0.5, 0.9], [0, 1, 1])


def test_max_breakpoints_limits_the_models():
    rng = np.random.default_rng(42)
    s = rng.random(5000)
    y = (rng.random(5000) < s).astype(float)
    cal = ENIR(max_breakpoints=10).fit(s, y)
    assert cal.n_breakpoints_ > 10 and cal.lambdas_.size <= 9
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ENIR().fit(s, y).lambdas_.size <= 99
