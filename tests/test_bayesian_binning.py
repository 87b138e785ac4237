"""SBB and ABB against brute force over every binning of the raw (tied, weighted) points."""

from __future__ import annotations

import itertools
import json
import math
import warnings

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import clone

from mlcal.calibrators.bayesian_binning import ABB, SBB, PreAggregationWarning


# -- brute force, straight from the paper's Eq. 2.4-2.8, in linear space on the raw points -----

def _binnings(n):
    """Every binning of n sorted points as a list of (l, u) inclusive index pairs."""
    for mask in itertools.product((False, True), repeat=n - 1):
        bins, start = [], 0
        for k, cut in enumerate(mask):
            if cut:
                bins.append((start, k))
                start = k + 1
        bins.append((start, n - 1))
        yield bins


def brute_force(s, y, w, lam):
    """All binnings of the raw sorted points with Score(M) = prod_b Prior(u_b) prod (1 - Prior(k))
    n0! n1! / (n + 1)! (gamma functions for weighted counts); tied scores get Prior = 0.

    Returns (sorted scores, scores, point_values, n_bins) with point_values[i, j] = P(x_j | M_i)
    for the raw sorted points j, and n_bins[i] the number of bins of binning i.
    """
    order = np.argsort(s, kind="stable")
    s, y, w = s[order], y[order], w[order]
    n = s.shape[0]
    span = s[-1] - s[0]
    prior = [1.0 - math.exp(-lam * (s[k + 1] - s[k]) / span) for k in range(n - 1)] + [1.0]
    factor, estimate = {}, {}                 # Eq. 2.7's factor and (n1+1)/(n+2) of every bin
    for l in range(n):
        for u in range(l, n):
            n1 = float(np.sum(w[l:u + 1] * y[l:u + 1]))
            n0 = float(np.sum(w[l:u + 1] * (1 - y[l:u + 1])))
            factor[l, u] = (prior[u] * math.prod(1.0 - prior[k] for k in range(l, u))
                            * math.gamma(n0 + 1) * math.gamma(n1 + 1) / math.gamma(n0 + n1 + 2))
            estimate[l, u] = (n1 + 1) / (n0 + n1 + 2)
    scores, values, n_bins = [], [], []
    for bins in _binnings(n):
        vals = np.empty(n)
        for l, u in bins:
            vals[l:u + 1] = estimate[l, u]
        scores.append(math.prod(factor[b] for b in bins))
        values.append(vals)
        n_bins.append(len(bins))
    return s, np.array(scores), np.array(values), np.array(n_bins)


def attach(train_sorted, x):
    """Index (into the raw sorted training points) of the nearest training score to each x."""
    uniq = np.unique(train_sorted)
    j = np.abs(x[:, None] - uniq[None, :]).argmin(axis=1)
    return np.searchsorted(train_sorted, uniq[j])  # first raw point of that tie block


def make_data(seed, n, ties, weights):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    if ties:
        s = np.round(s * 4) / 5 + 0.05          # only a handful of distinct values in [0, 1]
        s[:3] = s[3]                             # and at least one tie block of 4
    y = rng.integers(0, 2, n)
    y[0], y[1] = 0, 1
    if weights == "unit":
        w = np.ones(n)
    elif weights == "integer":
        w = rng.integers(1, 4, n).astype(float)
    else:
        w = rng.uniform(0.2, 2.5, n)
    return s, y, w


CASES = [(seed, n, ties, weights)
         for seed, (n, ties, weights) in enumerate([
             (2, False, "unit"), (3, False, "unit"), (5, False, "fractional"),
             (9, False, "unit"), (12, False, "unit"), (12, False, "integer"),
             (12, False, "fractional"), (10, True, "unit"), (12, True, "integer"),
             (12, True, "fractional")])]


@pytest.mark.parametrize("seed,n,ties,weights", CASES)
@pytest.mark.parametrize("lam", [0.7, 6.0])
def test_abb_equals_brute_force_average(seed, n, ties, weights, lam):
    s, y, w = make_data(seed, n, ties, weights)
    if np.unique(s).size == 1:
        pytest.skip("one unique score")
    model = ABB(lam=lam, max_unique=None).fit(s, y, w)
    s_sorted, scores, values, n_bins = brute_force(s, y, w, lam)
    z = scores.sum()
    assert model.log_evidence_[0] == pytest.approx(math.log(z), rel=1e-12, abs=1e-12)
    post = scores / z
    # the folded map at random points, at the training scores, and far outside the range
    rng = np.random.default_rng(seed + 100)
    x = np.concatenate((rng.uniform(s.min() - 0.2, s.max() + 0.2, 200), s, [-5.0, 5.0]))
    expected = post @ values[:, attach(s_sorted, x)]
    np.testing.assert_allclose(model.predict(x), expected, rtol=0, atol=1e-12)
    assert model.expected_n_bins_ == pytest.approx(float(post @ n_bins), rel=1e-12)


@pytest.mark.parametrize("seed,n,ties,weights", CASES)
@pytest.mark.parametrize("lam", [0.7, 6.0])
def test_sbb_equals_brute_force_search(seed, n, ties, weights, lam):
    s, y, w = make_data(seed, n, ties, weights)
    if np.unique(s).size == 1:
        pytest.skip("one unique score")
    model = SBB(lam=lam, max_unique=None).fit(s, y, w)
    s_sorted, scores, values, n_bins = brute_force(s, y, w, lam)
    best = scores.max()
    assert model.log_score_ == pytest.approx(math.log(best), rel=1e-12, abs=1e-12)
    assert model.log_posterior_ == pytest.approx(math.log(best / scores.sum()), abs=1e-10)
    # the selected binning is one of the maximisers (exact ties are possible with equal data)
    got = model.predict(s_sorted)
    winners = np.flatnonzero(scores >= best * (1 - 1e-12))
    assert any(np.allclose(got, values[i], rtol=0, atol=1e-14) and model.n_bins_ == n_bins[i]
               for i in winners)


def dense_reference(x, pos, neg, lam):
    """Forward-backward and Viterbi on the full (N, N) matrix of bin scores with scipy's
    logsumexp and gammaln: an independent check at sizes brute force cannot reach."""
    from scipy.special import gammaln, logsumexp

    n = x.size
    cp = np.concatenate(([0.0], np.cumsum(pos)))
    cn = np.concatenate(([0.0], np.cumsum(neg)))
    t = np.diff(x) / (x[-1] - x[0])
    lb = np.append(np.log1p(-np.exp(-lam * t)), 0.0)
    l, u = np.triu_indices(n)
    n1, n0 = cp[u + 1] - cp[l], cn[u + 1] - cn[l]
    score = np.full((n, n), -np.inf)
    score[l, u] = (gammaln(n1 + 1) + gammaln(n0 + 1) - gammaln(n1 + n0 + 2) + lb[u]
                   - lam * (x[u] - x[l]) / (x[-1] - x[0]))
    phat = np.zeros((n, n))
    phat[l, u] = (n1 + 1) / (n1 + n0 + 2)
    f, g, v = np.zeros(n + 1), np.zeros(n + 1), np.zeros(n + 1)
    for j in range(n):
        f[j + 1] = logsumexp(f[:j + 1] + score[:j + 1, j])
        v[j + 1] = np.max(v[:j + 1] + score[:j + 1, j])
    for j in range(n - 1, -1, -1):
        g[j] = logsumexp(score[j, j:] + g[j + 1:])
    post = np.exp(f[:n, None] + score + g[None, 1:] - f[n])
    values = np.array([np.sum(post[:j + 1, j:] * phat[:j + 1, j:]) for j in range(n)])
    return f[n], g[0], v[n], values


@pytest.mark.parametrize("n,lam,weights,atol", [
    (400, 3.0, "unit", 1e-12), (300, 40.0, "fractional", 1e-12),
    # heavy points holding both classes (like pre-aggregated groups): log scores ~ -1e5, rows
    # whose previous-row stabiliser is hundreds of nats too high (the kernels' slow path)
    (60, 5.0, "heavy-fractional", 1e-9), (60, 5.0, "heavy-integer", 1e-9)])
def test_dense_reference_at_moderate_size(n, lam, weights, atol):
    rng = np.random.default_rng(n)
    x = np.sort(rng.random(n))
    if weights.startswith("heavy"):
        p = np.clip(x + 0.2 * rng.standard_normal(n), 0.05, 0.95)
        pos, neg = 1500 * p, 1500 * (1 - p)
        if weights == "heavy-integer":
            pos, neg = np.round(pos), np.round(neg)
        s, y, w = np.repeat(x, 2), np.tile([1, 0], n), np.column_stack((pos, neg)).ravel()
    else:
        y = (rng.random(n) < 0.15 + 0.7 * x).astype(int)
        w = np.ones(n) if weights == "unit" else rng.uniform(0.5, 3.0, n)
        s, pos, neg = x, w * y, w * (1 - y)
    log_z_fwd, log_z_bwd, best, values = dense_reference(x, pos, neg, lam)
    assert log_z_fwd == pytest.approx(log_z_bwd, rel=1e-13)
    abb = ABB(lam=lam, max_unique=None).fit(s, y, w)
    sbb = SBB(lam=lam, max_unique=None).fit(s, y, w)
    assert abb.log_evidence_[0] == pytest.approx(log_z_fwd, rel=1e-13)
    assert sbb.log_score_ == pytest.approx(best, rel=1e-13)
    np.testing.assert_allclose(abb.predict(x), values, rtol=0, atol=atol)


def test_ties_are_never_split_and_tie_blocks_equal_weighted_points():
    rng = np.random.default_rng(3)
    s = np.repeat(rng.random(6), 3)                      # 6 distinct scores, 3 copies each
    y = rng.integers(0, 2, s.size)
    y[:2] = (0, 1)
    for cls in (SBB, ABB):
        tied = cls(lam=2.0, max_unique=None).fit(s, y)
        # the same data given as one weighted row per score and class
        keys = np.unique(np.column_stack((s, y)), axis=0)
        counts = np.array([np.sum((s == a) & (y == b)) for a, b in keys])
        weighted = cls(lam=2.0, max_unique=None).fit(keys[:, 0], keys[:, 1], counts)
        x = np.linspace(-0.1, 1.1, 301)
        np.testing.assert_allclose(tied.predict(x), weighted.predict(x), rtol=0, atol=1e-14)
        assert tied.n_unique_ == 6 and len(tied.map_.thresholds) <= 5


def test_auto_lambda_picks_grid_argmax():
    rng = np.random.default_rng(11)
    s = rng.random(11)
    y = (s > 0.45).astype(int)
    y[[2, 7]] = 1 - y[[2, 7]]
    grid = [0.05, 0.5, 2.0, 8.0, 40.0, 300.0]
    brute = np.array([math.log(brute_force(s, y, np.ones(11), lam)[1].sum()) for lam in grid])
    best = int(np.argmax(brute))
    assert 0 < best < len(grid) - 1                       # the choice is not a grid edge
    for cls in (SBB, ABB):
        auto = cls(lam_grid=grid, max_unique=None).fit(s, y)
        np.testing.assert_allclose(auto.log_evidence_, brute, rtol=1e-12)
        np.testing.assert_array_equal(auto.lambda_grid_, grid)
        assert auto.lambda_ == grid[best]
        fixed = cls(lam=grid[best], max_unique=None).fit(s, y)
        np.testing.assert_array_equal(auto.predict(s), fixed.predict(s))
    default = ABB().fit(s, y)
    assert len(default.lambda_grid_) >= 5
    assert default.lambda_ == default.lambda_grid_[np.argmax(default.log_evidence_)]


def test_pre_aggregation_is_exact_over_between_group_binnings():
    """With groups, the fit is the brute-force average over binnings whose boundaries fall
    between groups, under the paper's prior conditioned on no boundary inside a group."""
    rng = np.random.default_rng(5)
    s = np.round(rng.random(13), 1)                    # ties included
    y = rng.integers(0, 2, 13)
    y[:2] = (0, 1)
    w = rng.integers(1, 3, 13).astype(float)
    lam = 3.0
    with pytest.warns(PreAggregationWarning, match="max_unique=5"):
        abb = ABB(lam=lam, max_unique=5).fit(s, y, w)
    with pytest.warns(PreAggregationWarning):
        sbb = SBB(lam=lam, max_unique=5).fit(s, y, w)
    assert abb.aggregated_ and abb.n_points_ <= 5 < abb.n_unique_ and sbb.aggregated_
    s_sorted, scores, values, _ = brute_force(s, y, w, lam)
    cuts = abb.map_.thresholds                           # one cut between neighbouring groups
    assert cuts.size == abb.n_points_ - 1
    np.testing.assert_array_equal(sbb.map_.thresholds, cuts[np.isin(cuts, sbb.map_.thresholds)])
    group = np.searchsorted(cuts, s_sorted, side="right")
    inside = group[1:] == group[:-1]                     # gaps inside a group (ties included)
    family = np.array([not any(inside[u] for _, u in bins[:-1])
                       for bins in _binnings(len(s))])
    post = scores[family] / scores[family].sum()
    np.testing.assert_allclose(abb.predict(s_sorted), post @ values[family], rtol=0, atol=1e-12)
    # the conditioning constant: no boundary in any inside gap, prob exp(-lam * sum of gaps)
    shift = -lam * _inside_gap_sum(s_sorted, inside)
    assert math.log(scores[family].sum()) == pytest.approx(abb.log_evidence_[0] + shift,
                                                           rel=1e-12)
    assert math.log(scores[family].max()) == pytest.approx(sbb.log_score_ + shift, rel=1e-12)


def _inside_gap_sum(s_sorted, inside):
    gaps = np.diff(s_sorted) / (s_sorted[-1] - s_sorted[0])
    return float(gaps[inside].sum())


@pytest.mark.parametrize("cls", [SBB, ABB])
def test_large_input_is_aggregated_without_overflow(cls):
    rng = np.random.default_rng(0)
    n = 100_000
    s = rng.random(n)
    y = (rng.random(n) < 0.1 + 0.8 * s ** 2).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # any numpy warning fails the test
        with pytest.warns(PreAggregationWarning, match="100000 unique scores"):
            model = cls().fit(s, y)
    assert model.aggregated_ and model.n_unique_ == n and model.n_points_ <= 5000
    assert np.all(np.isfinite(model.log_evidence_))
    p = model.predict(np.linspace(0, 1, 1001))
    assert np.all(np.isfinite(p)) and p.min() >= 0 and p.max() <= 1
    # the calibration curve is recovered (the truth is 0.1 + 0.8 s^2)
    grid = np.linspace(0.05, 0.95, 19)
    assert np.max(np.abs(model.predict(grid) - (0.1 + 0.8 * grid ** 2))) < 0.08


@pytest.mark.parametrize("cls", [SBB, ABB])
def test_json_round_trip_and_clone(cls):
    rng = np.random.default_rng(2)
    s = rng.normal(size=300) * 3                         # raw margins: sigmoid input transform
    y = (rng.random(300) < expit(s)).astype(int)
    model = cls(lam_grid=[0.5, 5.0, 50.0], max_unique=200)
    with pytest.warns(PreAggregationWarning):
        model.fit(s, y)
    assert model.map_.input_transform == "sigmoid"
    text = model.to_json()
    back = cls.from_json(text)
    x = np.linspace(-8, 8, 999)
    np.testing.assert_array_equal(back.predict(x), model.predict(x))
    assert json.loads(text)["params"] == {"lam": "auto", "lam_grid": [0.5, 5.0, 50.0],
                                          "max_unique": 200, "input_transform": "auto",
                                          "max_map_size": 10_000, "bound_smoothing": None}
    assert back.get_params() == model.get_params()
    assert clone(model).get_params() == model.get_params()


def test_sigmoid_transform_matches_explicit_squashing():
    rng = np.random.default_rng(4)
    s = rng.normal(size=200) * 4
    y = (rng.random(200) < expit(s)).astype(int)
    raw = ABB(lam=5.0).fit(s, y)
    squashed = ABB(lam=5.0).fit(expit(s), y)
    np.testing.assert_allclose(raw.predict(s), squashed.predict(expit(s)), rtol=0, atol=1e-14)


def test_prior_is_affine_invariant():
    rng = np.random.default_rng(6)
    s = rng.random(150)
    y = (rng.random(150) < s).astype(int)
    a = ABB(lam=4.0).fit(s, y)
    b = ABB(lam=4.0).fit(0.25 + 0.5 * s, y)
    np.testing.assert_allclose(a.predict(s), b.predict(0.25 + 0.5 * s), rtol=0, atol=1e-12)


def test_single_unique_score_gives_posterior_mean():
    y = np.array([0, 1, 1, 1, 0, 1])
    for cls in (SBB, ABB):
        model = cls().fit(np.full(6, 0.3), y)
        np.testing.assert_allclose(model.predict([0.0, 0.3, 1.0]), (4 + 1) / (6 + 2))
        assert model.map_.thresholds.size == 0 and model.n_points_ == 1


def test_adjacent_floats_keep_their_own_value():
    from mlcal._solvers.binning_dp import abb_point_means, make_problem

    x = 0.5 + np.arange(6) * np.spacing(0.5)            # consecutive doubles: midpoints round
    y = np.array([0, 1, 0, 0, 1, 1])
    model = ABB(lam=50.0).fit(x, y)
    problem = make_problem(y.astype(float), 1.0 - y, np.diff(x) / (x[-1] - x[0]))
    np.testing.assert_allclose(model.predict(x), abb_point_means(problem, 50.0)[0], atol=1e-15)
    assert np.all(np.diff(model.map_.thresholds) > 0)


def test_sbb_recovers_a_step():
    s = np.linspace(0, 1, 400)
    y = (s > 0.6).astype(int)
    model = SBB().fit(s, y)
    assert model.n_bins_ == 2
    assert model.map_.thresholds[0] == pytest.approx(0.6, abs=0.003)


@pytest.mark.parametrize("params,match", [
    ({"lam": -1.0}, "lam"), ({"lam": "big"}, "lam"), ({"lam": float("nan")}, "lam"),
    ({"lam": True}, "lam"), ({"lam_grid": []}, "lam_grid"), ({"lam_grid": [1.0, 0.0]}, "lam_grid"),
    ({"lam_grid": "1,2"}, "lam_grid"), ({"max_unique": 1}, "max_unique"),
    ({"max_unique": 2.5}, "max_unique"), ({"input_transform": "log"}, "input_transform")])
@pytest.mark.parametrize("cls", [SBB, ABB])
def test_bad_parameters_raise(cls, params, match):
    with pytest.raises(ValueError, match=match):
        cls(**params).fit([0.1, 0.4, 0.8], [0, 1, 1])
