"""ELiTE and its linear trend-filtering solver, checked against independent oracles.

* the trend-filtering optimum at any lambda: its dual is a box-constrained least-squares problem,
  solved exactly by scipy's BVLS active-set method (dense matrices built here);
* lambda_max: the weighted least-squares line (numpy polyfit), and a kink just below it;
* AICc, weights and the folded map: recomputed here in plain numpy from the path's fitted values
  (docs/elite.md, 'Scoring' and 'Prediction and exact fold').
"""

import json

import numpy as np
import pytest
from scipy.optimize import lsq_linear
from scipy.special import expit

from mlcal._solvers.ties import sort_and_collapse
from mlcal._solvers.trend_filter import lambda_grid, thin, trend_filter_path
from mlcal.calibrators.base import BaseCalibrator
from mlcal.calibrators.elite import ELiTE
from mlcal.maps import LinearMap


# ------------------------------------------------------------------------------------------
# oracles
# ------------------------------------------------------------------------------------------
def second_differences(x):
    """Dense D with (D b)_i = slope change at x_{i+1}."""
    n = x.size
    d = np.diff(x)
    D = np.zeros((n - 2, n))
    i = np.arange(n - 2)
    D[i, i] = 1.0 / d[:-1]
    D[i, i + 1] = -1.0 / d[:-1] - 1.0 / d[1:]
    D[i, i + 2] = 1.0 / d[1:]
    return D


def brute_trend_filter(x, y, w, lam):
    """argmin 1/2 sum w (b - y)^2 + lam ||D b||_1 through its dual: b = y - W^-1 D'u with u
    minimising ||W^-1/2 D'u - W^1/2 y||^2 over the box [-lam, lam]^(n-2) (exact, BVLS)."""
    D = second_differences(x)
    A = D.T / np.sqrt(w)[:, None]
    u = lsq_linear(A, np.sqrt(w) * y, bounds=(-lam, lam), method="bvls", tol=1e-15).x
    return y - (D.T @ u) / w


def objective(x, y, w, lam, b):
    return 0.5 * np.sum(w * (b - y) ** 2) + lam * np.abs(second_differences(x) @ b).sum()


def slope_changes(x, b):
    """Slope changes of the interpolant through (x, b) at the interior points, and the size
    that rounding of b alone can produce there (1e-9 * |b| over the adjacent gaps)."""
    d = np.diff(x)
    db = np.diff(np.diff(b) / d)
    return db, 1e-9 * np.abs(b).max() * (1 / d[:-1] + 1 / d[1:])


def random_points(rng, n, kind):
    x = np.unique(rng.random(n))
    n = x.size
    if kind == 0:
        y = (rng.random(n) < x).astype(float)            # labels
    elif kind == 1:
        y = rng.random(n)                                 # thinned-label-like means
    else:
        y = np.sin(6 * x) + 0.2 * rng.standard_normal(n)  # smooth signal + noise
    w = rng.uniform(0.2, 4.0, n) if kind != 1 else np.ones(n)
    return x, y, w


def extrapolated(xk, vk, s):
    """Independent evaluation: interpolation inside, end-slope lines outside."""
    out = np.interp(s, xk, vk)
    lo, hi = s < xk[0], s > xk[-1]
    out[lo] = vk[0] + (s[lo] - xk[0]) * (vk[1] - vk[0]) / (xk[1] - xk[0])
    out[hi] = vk[-1] + (s[hi] - xk[-1]) * (vk[-1] - vk[-2]) / (xk[-1] - xk[-2])
    return out


def random_member(rng, m, scale, max_size):
    """Member ``m`` of a random ELiTE average: ``1 .. max_size - 1`` knots on one of three
    scales, values of three spreads, every 4th clipped to [0, 1] and every 5th flat."""
    xk = np.unique(rng.random(int(rng.integers(1, max_size))) * [1.0, 1e-3, 50.0][scale])
    vk = rng.standard_normal(xk.size) * [0.2, 1.0, 5.0][m % 3] + 0.5
    if m % 4 == 1:
        vk = np.clip(vk, 0.0, 1.0)
    if m % 5 == 2:
        vk[:] = vk[0]
    return xk, vk


def calibration_data(n, seed, ties=False):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    if ties:
        s = np.round(s, 2)
    y = (rng.random(n) < s ** 2).astype(float)
    return s, y


# ------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_every_lambda_matches_the_brute_force_qp(seed):
    rng = np.random.default_rng(seed)
    x, y, w = random_points(rng, int(rng.integers(8, 41)), seed % 3)
    path = trend_filter_path(x, y, w, n_lambdas=50)
    assert path.lambdas.size == 50 and path.lambda_max > 0
    np.testing.assert_allclose(path.lambdas, path.lambda_max * np.logspace(0, -4, 50), rtol=1e-12)
    for j in range(0, 50, 2):
        lam = path.lambdas[j]
        ours = path.fitted(j)
        ref = brute_trend_filter(x, y, w, lam)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6)
        assert objective(x, y, w, lam, ours) <= objective(x, y, w, lam, ref) * (1 + 1e-12) + 1e-12
        assert path.kkt[j] < 1e-8


@pytest.mark.parametrize("seed", range(3))
def test_homotopy_fallback_matches_the_brute_force_qp(seed):
    """With one active-set iteration allowed, steps are shortened and walked exactly by the
    homotopy; the solutions must be the same optima."""
    rng = np.random.default_rng(100 + seed)
    x, y, w = random_points(rng, 30, seed)
    path = trend_filter_path(x, y, w, n_lambdas=12, pdas_max_iter=1)
    assert path.n_events > 0 and path.n_halvings > 0
    for j, lam in enumerate(path.lambdas):
        np.testing.assert_allclose(path.fitted(j), brute_trend_filter(x, y, w, lam), atol=1e-6)


def test_tiny_lambda_ratio_with_exactly_fitted_stretches_matches_the_brute_force_qp():
    """lambda_min_ratio = 1e-7 on 0/1 labels: long runs of equal labels are fitted exactly, their
    knots have zero slope change, and re-solving the homotopy's knot set used to remove and
    re-add them until it raised "the homotopy's knot set does not re-solve"."""
    rng = np.random.default_rng(11)
    x = np.sort(rng.random(200))
    y = (rng.random(200) < x ** 3).astype(float)
    w = np.ones(200)
    path = trend_filter_path(x, y, w, n_lambdas=50, lambda_min_ratio=1e-7)
    assert path.n_halvings > 0   # PDAS failed on some steps: the homotopy fallback ran
    for j in range(0, 50, 7):
        lam = path.lambdas[j]
        ours, ref = path.fitted(j), brute_trend_filter(x, y, w, lam)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6)
        assert objective(x, y, w, lam, ours) <= objective(x, y, w, lam, ref) * (1 + 1e-12) + 1e-12
    # and the calibrator accepts the ratio
    s, yy = calibration_data(2000, 0)
    assert np.isfinite(ELiTE(lambda_min_ratio=1e-7).fit(s, yy).predict(s)).all()


@pytest.mark.parametrize("seed", range(4))
def test_lambda_max_gives_the_weighted_least_squares_line(seed):
    rng = np.random.default_rng(seed)
    x, y, w = random_points(rng, 25, seed % 3)
    path = trend_filter_path(x, y, w)
    slope, icpt = np.polyfit(x, y, 1, w=np.sqrt(w))
    np.testing.assert_allclose(path.fitted(0), icpt + slope * x, atol=1e-10)
    assert path.n_knots[0] == 0
    # the brute-force optimum agrees at lambda_max and has a kink just below it
    np.testing.assert_allclose(brute_trend_filter(x, y, w, path.lambda_max), icpt + slope * x,
                               atol=1e-8)
    below = brute_trend_filter(x, y, w, 0.99 * path.lambda_max)
    assert np.abs(second_differences(x) @ below).max() > 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_all_models_log_likelihoods_in_one_call_equal_the_per_model_ones(seed):
    """``clipped_log_likelihoods`` (one compiled call, logarithms in a separate pass) gives the
    per-model kernel's sums and counts to the bit, screened floors and others alike."""
    rng = np.random.default_rng(300 + seed)
    x, y, w = random_points(rng, int(rng.integers(40, 400)), seed % 3)
    path = trend_filter_path(x, y, w, n_lambdas=20)
    for z in (np.clip(y, 0.0, 1.0), (y > 0.5).astype(float), np.round(np.clip(y, 0, 1) * 4) / 4):
        for floor in (1e-12, 2.0**-53, 0.3, 0.0, 0.5):
            ll, impossible = path.clipped_log_likelihoods(z, w, floor)
            assert ll.dtype == np.float64 and impossible.dtype == np.int64
            for j in range(path.lambdas.size):
                one = path.clipped_log_likelihood(j, z, w, floor)
                assert np.float64(one[0]).tobytes() == ll[j].tobytes()
                assert one[1] == impossible[j]


def test_kept_segment_gram_sums_give_the_fresh_solve():
    """The active set keeps each segment's Gram sums between iterations: a solve after solves
    of other knot sets (the kept sums partly reused) equals the solve with nothing kept."""
    from mlcal._solvers.trend_filter import BLOCK, _block_moments, _fit_at

    rng = np.random.default_rng(7)
    x, y, w = random_points(rng, 600, 2)
    n = x.size
    mom = _block_moments(x, y, w, BLOCK)
    kept_end, kept = np.full(n, -1, dtype=np.int64), np.empty((n, 5))

    def solve(knots, signs, lam, seg_end, seg_sums):
        k2 = knots.size + 2
        bp = np.concatenate(([0], knots + 1, [n - 1])).astype(np.int64)
        sg = np.concatenate(([0.0], signs, [0.0]))
        c = np.empty(k2)
        _fit_at(x, y, w, BLOCK, mom, bp, sg, k2, lam, c, np.empty(k2), np.empty(k2),
                np.empty(k2), seg_end, seg_sums)
        return c

    knots = np.sort(rng.choice(n - 2, 30, replace=False))
    reused = 0
    for _ in range(60):   # a few knots added and removed at a time, as PDAS does
        keep = rng.random(knots.size) > 0.1
        knots = np.union1d(knots[keep], rng.choice(n - 2, int(rng.integers(0, 4))))
        signs = rng.choice([-1.0, 1.0], knots.size)
        lam = float(rng.uniform(0.01, 1.0))
        reused += int(np.sum(kept_end[np.concatenate(([0], knots + 1))] ==
                             np.concatenate((knots + 1, [n - 1]))))
        fresh = solve(knots, signs, lam, np.full(n, -1, dtype=np.int64), np.empty((n, 5)))
        assert solve(knots, signs, lam, kept_end, kept).tobytes() == fresh.tobytes()
    assert reused > 500   # many segments came from the kept sums (796 of about 1,800)


def test_large_problem_is_certified_optimal():
    """N = 20000 binary labels: every solution satisfies the KKT conditions (checked here from
    scratch: the dual recovered from the residuals is feasible, knots carry its sign)."""
    rng = np.random.default_rng(7)
    s = np.sort(expit(2 * rng.standard_normal(20000)))
    y = (rng.random(s.size) < s ** 2).astype(float)
    x, yb, w = sort_and_collapse(s, y, np.ones(s.size))
    path = trend_filter_path(x, yb, w)
    for j in (5, 25, 49):
        lam, b = path.lambdas[j], path.fitted(j)
        r = w * (yb - b)
        # nu_i = sum_{k <= i+1} r_k (x_{i+1} - x_k), by cumulative sums (independent of the solver)
        S = np.cumsum(r)
        nu = np.concatenate(([0.0], np.cumsum(np.diff(x) * S[:-1])))[1:-1]
        db, noise = slope_changes(x, b)
        kink = np.abs(db) > noise
        assert np.abs(nu).max() <= lam * (1 + 1e-6)
        np.testing.assert_allclose(np.abs(nu[kink]), lam, rtol=1e-6)
        assert np.all(np.sign(nu[kink]) == np.sign(db[kink]))


def test_thinning_merges_cells_and_keeps_weighted_means():
    rng = np.random.default_rng(3)
    s = np.sort(rng.choice(rng.random(200) * 1e-3, 500))   # ties and close neighbours
    x, yb, w = sort_and_collapse(s, (rng.random(500) < 0.5).astype(float), rng.uniform(1, 2, 500))
    tol = 1e-5
    xt, yt, wt = thin(x, yb, w, tol)
    cells = np.floor(x / tol)
    uc = np.unique(cells)
    assert xt.size == uc.size and np.all(np.diff(xt) > 0)
    for k, c in enumerate(uc):
        m = cells == c
        assert wt[k] == pytest.approx(w[m].sum(), rel=1e-12)
        assert xt[k] == pytest.approx(np.dot(w[m], x[m]) / w[m].sum(), rel=1e-12)
        assert yt[k] == pytest.approx(np.dot(w[m], yb[m]) / w[m].sum(), rel=1e-12)
    assert thin(x, yb, w, 0.0)[0] is x


# ------------------------------------------------------------------------------------------
# the calibrator
# ------------------------------------------------------------------------------------------
def independent_members(cal):
    """Knots, values and weights of every member, from the path's fitted values."""
    path = cal.path_
    return [(path.x, path.fitted(j)) for j in range(cal.lambdas_.size)]


@pytest.mark.parametrize("seed,thin_tol", [(0, 1e-5), (1, None), (2, 0.02)])
def test_scores_and_weights_follow_elite_aicc(seed, thin_tol):
    s, y = calibration_data(400, seed, ties=True)
    cal = ELiTE(thin_tol=thin_tol).fit(s, y)
    x, yb, w = sort_and_collapse(s, y, np.ones(s.size))
    x, yb, w = thin(x, yb, w, thin_tol or 0.0)
    assert cal.n_points_ == x.size
    aicc = []
    for j in range(50):
        b = cal.path_.fitted(j)
        db, noise = slope_changes(x, b)
        df = int(np.count_nonzero(np.abs(db) > noise)) + 2
        assert df == cal.df_[j]
        # every point scored, predictions floored at 1e-12, 0 log 0 = 0; N = instances
        p = np.clip(b, 1e-12, 1 - 1e-12)
        ll = np.sum(w * (np.where(yb > 0, yb * np.log(p), 0.0)
                         + np.where(yb < 1, (1 - yb) * np.log1p(-p), 0.0)))
        N = s.size
        # AICc is undefined (division by <= 0) when N <= df + 1: such models get +inf
        aicc.append(2 * df - 2 * ll + 2 * df * (df + 1) / (N - df - 1) if N > df + 1 else np.inf)
    aicc = np.array(aicc)
    np.testing.assert_allclose(cal.aicc_, aicc, rtol=1e-9)
    rel = np.exp(-(aicc - aicc.min()) / 2)
    np.testing.assert_allclose(cal.weights_, rel / rel.sum(), rtol=1e-9, atol=1e-300)
    assert cal.lambdas_[0] == cal.lambda_max_ and cal.df_[0] == 2


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.usefixtures("without_output_floor")
def test_folded_map_is_the_average_of_clipped_members_everywhere(seed):
    s, y = calibration_data(300 + 100 * seed, seed, ties=seed % 2 == 1)
    w = np.random.default_rng(seed).uniform(0.5, 2, s.size) if seed >= 2 else None
    cal = ELiTE(thin_tol=[1e-5, None, 1e-3, 1e-5][seed]).fit(s, y, sample_weight=w)
    assert isinstance(cal.map_, LinearMap)
    members = independent_members(cal)
    knots = cal.map_.knots
    t = np.concatenate([np.linspace(-1e3, 1e3, 2001), np.linspace(-3, 4, 20001), s, knots,
                        np.nextafter(knots, np.inf), np.nextafter(knots, -np.inf), [-1e9, 1e9]])
    avg = sum(wt * np.clip(extrapolated(xk, vk, t), 0, 1)
              for (xk, vk), wt in zip(members, cal.weights_))
    np.testing.assert_allclose(cal.predict(t), avg, rtol=0, atol=1e-12)
    # beyond the outermost knot the average is constant (every member has saturated)
    far = np.array([knots[0] - 1e6, knots[-1] + 1e6])
    far_avg = sum(wt * np.clip(extrapolated(xk, vk, far), 0, 1)
                  for (xk, vk), wt in zip(members, cal.weights_))
    np.testing.assert_allclose(far_avg, cal.map_.values[[0, -1]], atol=1e-12)


@pytest.mark.usefixtures("without_output_floor")
def test_predict_path_is_what_is_averaged():
    s, y = calibration_data(500, 4)
    cal = ELiTE().fit(s, y)
    t = np.linspace(-0.5, 1.5, 301)
    P = cal.predict_path(t)
    assert P.shape == (50, t.size) and P.min() >= 0 and P.max() <= 1
    np.testing.assert_allclose(cal.weights_ @ P, cal.predict(t), atol=1e-12)
    raw = cal.predict_path(t, clip=False)
    assert raw.min() < 0 or raw.max() > 1  # linear extrapolation leaves [0, 1]


def test_permuted_and_tied_inputs_give_identical_maps():
    s, y = calibration_data(600, 5, ties=True)
    ref = ELiTE().fit(s, y)
    perm = np.random.default_rng(0).permutation(s.size)
    again = ELiTE().fit(s[perm], y[perm])
    assert again.map_ == ref.map_
    # integer weights are repeated rows
    rng = np.random.default_rng(1)
    counts = rng.integers(1, 4, s.size)
    weighted = ELiTE().fit(s, y, sample_weight=counts.astype(float))
    repeated = ELiTE().fit(np.repeat(s, counts), np.repeat(y, counts))
    np.testing.assert_array_equal(weighted.map_.knots, repeated.map_.knots)
    np.testing.assert_allclose(weighted.map_.values, repeated.map_.values, rtol=0, atol=1e-12)


def test_raw_margins_are_squashed_and_recorded():
    rng = np.random.default_rng(2)
    f = 3 * rng.standard_normal(800)
    y = (rng.random(800) < expit(f)).astype(float)
    cal = ELiTE().fit(f, y)
    assert cal.map_.input_transform == "sigmoid"
    ref = ELiTE(input_transform="identity").fit(expit(f), y)
    t = np.linspace(-8, 8, 101)
    np.testing.assert_allclose(cal.predict(t), ref.predict(expit(t)), atol=1e-12)
    with pytest.raises(ValueError, match="requires scores in \\[0, 1\\]"):
        ELiTE(input_transform="identity").fit(f, y)


def test_recovers_a_known_calibration_curve():
    rng = np.random.default_rng(8)
    s = rng.random(40000)
    y = (rng.random(s.size) < s ** 2).astype(float)
    t = np.linspace(0.0, 1.0, 101)
    err = ELiTE().fit(s, y).predict(t) - t ** 2
    # piecewise linear with few knots and l1-shrunk slope changes: close on average, and
    # never far (the true curve has no kink to find)
    assert np.sqrt(np.mean(err ** 2)) < 0.03 and np.abs(err).max() < 0.08


def test_json_round_trip():
    s, y = calibration_data(300, 6)
    cal = ELiTE(n_lambdas=20, lambda_min_ratio=1e-3, thin_tol=None).fit(s, y)
    text = cal.to_json()
    back = BaseCalibrator.from_json(text)
    assert isinstance(back, ELiTE) and back.get_params() == cal.get_params()
    t = np.linspace(-1, 2, 501)
    np.testing.assert_array_equal(back.predict(t), cal.predict(t))
    assert json.loads(text)["map"]["type"] == "linear"
    with pytest.raises(ValueError, match="refit"):
        back.predict_path(t)


# ------------------------------------------------------------------------------------------
# degenerate inputs and parameters
# ------------------------------------------------------------------------------------------
def test_all_scores_equal_give_the_base_rate():
    y = np.array([0, 1, 1, 0, 1.0])
    w = np.array([1, 2, 1, 1, 3.0])
    cal = ELiTE().fit(np.full(5, 0.4), y, sample_weight=w)
    np.testing.assert_allclose(cal.predict([-5, 0.4, 7]), np.dot(w, y) / w.sum())
    assert cal.lambda_max_ == 0 and np.all(cal.lambdas_ == 0)
    np.testing.assert_allclose(cal.weights_, 1 / 50)


@pytest.mark.usefixtures("without_output_floor")
def test_two_distinct_scores_give_the_clipped_line_through_their_means():
    s = np.array([0.2, 0.2, 0.2, 0.6, 0.6])
    y = np.array([0, 0, 1, 1, 1.0])
    cal = ELiTE().fit(s, y)
    line = lambda t: 1 / 3 + (t - 0.2) * (1 - 1 / 3) / 0.4  # noqa: E731
    t = np.array([0.0, 0.1, 0.2, 0.4, 0.6, 0.7, 1.0])
    np.testing.assert_allclose(cal.predict(t), np.clip(line(t), 0, 1), atol=1e-12)


@pytest.mark.usefixtures("without_output_floor")
def test_labels_on_a_line_give_that_line():
    s = np.repeat([0.1, 0.3, 0.5], 4)
    y = np.array([0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1, 0.0])  # means 1/4, 1/2, 3/4: on a line
    cal = ELiTE().fit(s, y)
    assert cal.lambda_max_ == 0
    t = np.linspace(-2, 3, 51)
    np.testing.assert_allclose(cal.predict(t), np.clip(0.125 + 1.25 * t, 0, 1), atol=1e-12)


@pytest.mark.parametrize("params,match", [
    ({"n_lambdas": 0}, "n_lambdas"), ({"n_lambdas": 2.5}, "n_lambdas"),
    ({"lambda_min_ratio": 0.0}, "lambda_min_ratio"), ({"lambda_min_ratio": 2}, "lambda_min_ratio"),
    ({"thin_tol": -1e-5}, "thin_tol"), ({"thin_tol": "x"}, "thin_tol"),
    ({"criterion": "cv"}, "criterion"), ({"input_transform": "probit"}, "input_transform"),
])
def test_bad_parameters_name_themselves(params, match):
    s, y = calibration_data(100, 0)
    with pytest.raises(ValueError, match=match):
        ELiTE(**params).fit(s, y)


@pytest.mark.parametrize("criterion", ["aic", "bic"])
def test_other_criteria_change_only_the_scores(criterion):
    s, y = calibration_data(400, 9)
    base = ELiTE().fit(s, y)
    other = ELiTE(criterion=criterion).fit(s, y)
    np.testing.assert_array_equal(other.df_, base.df_)
    ll, df, N = base.log_likelihood_, base.df_, base.n_used_
    if criterion == "aic":
        expect = 2 * df - 2 * ll
    else:
        expect = -2 * ll + df * (np.log(N) + np.log(2 * np.pi))
    np.testing.assert_allclose(other.aicc_, expect, rtol=1e-12)


def test_lambda_grid_is_log_spaced():
    g = lambda_grid(50, 1e-4)
    np.testing.assert_allclose(g, np.logspace(0, -4, 50), rtol=1e-12)
    assert lambda_grid(1).tolist() == [1.0]


@pytest.mark.parametrize("seed", range(6))
def test_fold_of_random_members_is_their_clipped_average(seed):
    """``fold_clipped_average`` (compiled crossings and sum) on member sets that ELiTE rarely
    makes: single breakpoints, flat and saturated pieces, values on 0 and 1, steep rays; the
    interpolant equals the average of the clipped members, evaluated independently, at the
    knots, between them and far beyond."""
    from mlcal._solvers.linear_fold import fold_clipped_average

    rng = np.random.default_rng(seed)
    members = [random_member(rng, m, seed % 3, 25) for m in range(int(rng.integers(1, 12)))]
    weights = rng.random(len(members))
    weights /= weights.sum()
    knots, values = fold_clipped_average(members, weights)
    t = np.concatenate([knots, (knots[1:] + knots[:-1]) / 2, [knots[0] - 1e3, knots[-1] + 1e3],
                        np.linspace(knots[0] - 1.0, knots[-1] + 1.0, 5001)])
    avg = sum(wt * np.clip(extrapolated(xk, vk, t) if xk.size > 1 else np.full(t.size, vk[0]),
                           0, 1) for (xk, vk), wt in zip(members, weights))
    np.testing.assert_allclose(np.interp(t, knots, values), avg, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_compiled_ray_limit_sums_equal_the_python_ones(seed):
    """The fold's limits at -inf / +inf (one compiled call) are the Python ``sum`` of
    ``_ray_limit`` over the members to the bit: single breakpoints, flat, saturated and
    nearly flat rays (whose saturation point overflows)."""
    from mlcal._solvers.linear_fold import _ray_limit, _ray_limit_sums

    rng = np.random.default_rng(50 + seed)
    members = [random_member(rng, m, m % 3, 8) for m in range(40)]
    for m, (xk, vk) in enumerate(members):
        if m % 7 == 3 and xk.size > 1:
            vk[1] = vk[0] + 1e-300
    weights = rng.random(len(members))
    offsets = np.concatenate(([0], np.cumsum([xk.size for xk, _ in members]))).astype(np.int64)
    xs = np.concatenate([xk for xk, _ in members])
    vs = np.concatenate([vk for _, vk in members])
    left, right = _ray_limit_sums(xs, vs, offsets, weights)
    assert np.float64(left).tobytes() == np.float64(
        sum(wt * _ray_limit(xk, vk, -1) for (xk, vk), wt in zip(members, weights))).tobytes()
    assert np.float64(right).tobytes() == np.float64(
        sum(wt * _ray_limit(xk, vk, +1) for (xk, vk), wt in zip(members, weights))).tobytes()


@pytest.mark.parametrize("n", [4, 6, 300])
def test_elementwise_aicc_equals_the_scalar_criterion(n):
    """The AICc scores computed elementwise are ``information_criterion``'s to the bit, the
    infinite ones (``N - df - 1 <= 0``, few instances) included."""
    from mlcal.calibrators.elite import information_criterion

    rng = np.random.default_rng(n)
    s = rng.random(n)
    y = (rng.random(n) < s).astype(int)
    y[:2] = [0, 1]
    cal = ELiTE(thin_tol=None).fit(s, y)
    n_total = float(cal.n_used_[0])
    expected = [information_criterion(ll, int(df), n_total, "aicc")
                for ll, df in zip(cal.log_likelihood_, cal.df_)]
    assert cal.aicc_.tobytes() == np.array(expected, dtype=np.float64).tobytes()
    if n == 4:
        assert np.isinf(cal.aicc_).any()
