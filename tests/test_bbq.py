"""BBQ against independent, literal re-implementations of the authors' recipe (docs/bbq.md)
on small inputs: the score from scipy Gamma/Beta products, the elbow rule step by step, and the
whole ensemble prediction."""

import math

import numpy as np
import pytest
from scipy.special import beta as beta_fn

from mlcal._solvers.bbq_models import bbq_bin_range, elbow
from mlcal.calibrators.bbq import BBQ
from mlcal.maps import StepMap


# ---------------------------------------------------------------------------------------------
# independent oracle: the recipe written out naively on the raw (uncollapsed) sorted data
def naive_bins(s_sorted, B):
    """(start, end) index pairs (end exclusive) of the B-bin equal-frequency model; a boundary
    inside a run of equal scores moves to the end of the run."""
    n = len(s_sorted)
    if B == 1:
        return [(0, n)]
    c = n // B
    bounds = []
    for i in range(1, B):
        k = i * c
        while k < n and s_sorted[k] == s_sorted[k - 1]:
            k += 1
        if k < n and (not bounds or bounds[-1] != k):
            bounds.append(k)
    starts = [0] + bounds
    ends = bounds + [n]
    return list(zip(starts, ends))


def naive_model(s_sorted, y_sorted, B):
    bins = naive_bins(s_sorted, B)
    cuts = [(s_sorted[e - 1] + s_sorted[e]) / 2 for _, e in bins[:-1]]
    edges = [0.0] + cuts + [1.0]
    log_ml, probs = 0.0, []
    for b, (st, en) in enumerate(bins):
        n = en - st
        n1 = float(np.sum(y_sorted[st:en]))
        n0 = n - n1
        m = (edges[b] + edges[b + 1]) / 2
        p = min(max(m, 0.005), 0.995)
        a, bb = 2 * p, 2 * (1 - p)
        # Beta-binomial marginal likelihood: Gamma(a+b)/(Gamma(a)Gamma(b)) *
        # Gamma(n1+a)Gamma(n0+b)/Gamma(n+a+b) = B(n1+a, n0+b)/B(a, b)
        log_ml += math.log(beta_fn(n1 + a, n0 + bb) / beta_fn(a, bb))
        pos_scores = s_sorted[st:en][y_sorted[st:en] == 1]
        p0 = (pos_scores.sum() + m) / (len(pos_scores) + 1)
        probs.append((n1 + p0) / (n + 1))
    return np.array(cuts), np.array(probs), log_ml


def literal_elbow(sv, alpha):
    """The elbow rule of docs/conventions.md, steps 1-5, with 1-based indices as written."""
    b = len(sv)
    sigma2 = np.var(sv)                       # population variance
    idxs = sorted(range(b), key=lambda i: -sv[i])   # Python sort is stable
    R = [None] + [sv[i] for i in idxs]        # R[1..b]
    k = 1
    while R[k] == R[k + 1]:
        k += 1
    while k < b and (R[k] - R[k + 1]) / sigma2 > alpha:
        k += 1
    return idxs[:k - 1] if k > 1 else idxs[:1]


def naive_bbq(s, y, alpha=0.001):
    order = np.argsort(s, kind="stable")
    s, y = s[order], y[order]
    n = len(s)
    r = np.cbrt(n)
    m = len(np.unique(s))                  # our rule: B never exceeds the unique scores
    b_range = range(min(max(1, math.floor(r / 10)), m),
                    min(math.ceil(n / 5), math.ceil(10 * r), m) + 1)
    models = [naive_model(s, y, B) for B in b_range]
    S = np.array([-2 * lm for _, _, lm in models])
    sv = np.exp((S.min() - S) / 2)
    kept = literal_elbow(list(sv), alpha)

    def predict(x):
        num = sum(sv[k] * models[k][1][np.searchsorted(models[k][0], x, side="right")]
                  for k in kept)
        return num / sum(sv[k] for k in kept)

    return list(b_range), S, kept, predict


def make(n, seed, n_distinct=None, power=1):
    rng = np.random.default_rng(seed)
    s = rng.random(n) ** power          # power > 1 piles scores near 0 (prior clip at 0.005)
    if n_distinct is not None:
        s = rng.choice(rng.random(n_distinct), n)
    y = (rng.random(n) < s ** 2).astype(float)
    y[:2] = [0.0, 1.0]
    return s, y


# ---------------------------------------------------------------------------------------------
def test_bin_range_uses_cbrt_not_pow():
    # the authors' pow(N, 1/3) gives 19.999... at N = 8000, hence B_min = 1; cbrt gives 2
    assert math.floor(8000 ** (1 / 3) / 10) == 1
    assert bbq_bin_range(1000) == (1, 100)
    assert bbq_bin_range(8000) == (2, 200)
    assert bbq_bin_range(27000) == (3, 300)
    assert bbq_bin_range(10 ** 6) == (10, 1000)
    assert bbq_bin_range(5) == (1, 1)
    assert bbq_bin_range(6) == (1, 2)
    s, y = make(8000, 0)
    cal = BBQ().fit(s, y)
    assert cal.candidate_n_bins_[0] == 2 and cal.candidate_n_bins_[-1] == 200


@pytest.mark.parametrize("n,seed,n_distinct,power", [(30, 0, None, 1), (47, 1, None, 1),
                                                     (60, 2, 7, 1), (200, 3, None, 8),
                                                     (120, 4, 15, 1)])
def test_scores_equal_gamma_product_formula(n, seed, n_distinct, power):
    s, y = make(n, seed, n_distinct, power)
    cal = BBQ().fit(s, y)
    b_range, S, _, _ = naive_bbq(s, y)
    assert cal.candidate_n_bins_.tolist() == b_range
    np.testing.assert_allclose(cal.scores_, S, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("n,seed,n_distinct", [(30, 0, None), (300, 5, None), (1000, 6, None),
                                               (400, 7, 25), (250, 8, 4)])
def test_ensemble_prediction_equals_naive_recipe(n, seed, n_distinct):
    s, y = make(n, seed, n_distinct)
    cal = BBQ().fit(s, y)
    b_range, S, kept, predict = naive_bbq(s, y)
    assert cal.kept_.tolist() == kept
    assert cal.n_bins_.tolist() == [b_range[k] for k in kept]
    sv = np.exp((S.min() - S) / 2)[kept]
    np.testing.assert_allclose(cal.weights_, sv / sv.sum(), rtol=1e-12)
    x = np.concatenate([np.random.default_rng(seed).random(2000), s, cal.map_.thresholds,
                        [0.0, 1.0]])
    np.testing.assert_allclose(cal.predict(x), predict(x), rtol=0, atol=1e-12)


def test_folded_map_equals_weighted_members():
    s, y = make(5000, 9)
    cal = BBQ().fit(s, y)
    assert len(cal.models_) == len(cal.weights_) >= 2
    assert np.isclose(cal.weights_.sum(), 1.0)
    x = np.concatenate([np.random.default_rng(1).random(20000), cal.map_.thresholds,
                        np.nextafter(cal.map_.thresholds, -1)])
    direct = sum(w * m(x) for w, m in zip(cal.weights_, cal.models_))
    np.testing.assert_allclose(cal.predict(x), direct, rtol=0, atol=1e-12)
    # the folded thresholds are exactly the union of the members' cuts
    union = np.unique(np.concatenate([m.thresholds for m in cal.models_]))
    np.testing.assert_array_equal(cal.map_.thresholds, union)


@pytest.mark.parametrize("seed", range(6))
def test_elbow_matches_literal_steps(seed):
    rng = np.random.default_rng(seed)
    sv = np.exp(-rng.exponential(3.0, 40))
    sv[rng.integers(40)] = 1.0
    sv[:5] = np.round(sv[:5], 1)          # some ties, also possibly at the top
    for alpha in (0.001, 0.005, 0.1, 1.0):
        assert elbow(sv, alpha).tolist() == literal_elbow(list(sv), alpha)


def test_elbow_excludes_the_model_after_the_last_big_gap():
    # gaps/variance: 0.1/var > alpha, then 0.0001/var < alpha -> k = 2, keep position 1 only
    sv = np.array([0.9, 1.0, 0.8999, 0.0])
    assert elbow(sv, 0.001).tolist() == literal_elbow(list(sv), 0.001) == [1]
    assert elbow(np.array([0.3]), 0.001).tolist() == [0]
    assert elbow(np.array([0.5, 0.5, 0.5]), 0.001).tolist() == [0, 1, 2]   # documented fallback


def test_no_overflow_or_nan_at_1e5():
    rng = np.random.default_rng(11)
    s = rng.beta(0.5, 0.5, 100_000)
    y = (rng.random(s.size) < s).astype(float)
    cal = BBQ().fit(s, y)
    assert np.isfinite(cal.scores_).all() and (cal.scores_ > 0).all()
    assert np.isfinite(cal.weights_).all() and np.isclose(cal.weights_.sum(), 1.0)
    p = cal.predict(np.linspace(0, 1, 10001))
    assert np.isfinite(p).all() and np.all(np.diff(cal.map_.thresholds) > 0)
    assert np.abs(cal.predict([0.1, 0.5, 0.9]) - [0.1, 0.5, 0.9]).max() < 0.05


def test_ties_are_never_split():
    s, y = make(600, 12, n_distinct=5)
    cal = BBQ().fit(s, y)
    distinct = np.unique(s)
    assert cal.n_realised_bins_.max() <= 5
    assert (cal.n_realised_bins_ < cal.n_bins_).any()
    for m in cal.models_:
        # every cut lies strictly between two neighbouring distinct scores
        pos = np.searchsorted(distinct, m.thresholds)
        assert np.all(distinct[pos - 1] < m.thresholds) and np.all(m.thresholds < distinct[pos])


@pytest.mark.parametrize("n", [2, 3, 5])
def test_small_n_falls_back_to_the_one_bin_model(n):
    s = np.linspace(0.2, 0.8, n)
    y = np.zeros(n)
    y[-1] = 1
    cal = BBQ().fit(s, y)
    assert cal.candidate_n_bins_.tolist() == [1] and cal.map_.thresholds.size == 0
    p0 = (s[-1] + 0.5) / 2            # positives' scores and the midpoint 0.5 of [0, 1]
    assert cal.predict([0.0])[0] == pytest.approx((1 + p0) / (n + 1), abs=1e-15)


def test_all_equal_scores_give_a_constant_map():
    y = np.array([0, 1] * 50, dtype=float)
    cal = BBQ().fit(np.full(100, 0.3), y)
    assert cal.map_.thresholds.size == 0
    assert (cal.n_realised_bins_ == 1).all() and len(cal.kept_) == len(cal.candidate_n_bins_)
    p0 = (50 * 0.3 + 0.5) / 51
    assert cal.predict([0.7])[0] == pytest.approx((50 + p0) / 101, abs=1e-14)


def test_integer_weights_equal_repeated_rows():
    s, y = make(300, 13)
    w = np.random.default_rng(3).integers(1, 4, s.size)
    a = BBQ().fit(s, y, sample_weight=w)
    b = BBQ().fit(np.repeat(s, w), np.repeat(y, w))
    np.testing.assert_allclose(a.scores_, b.scores_, rtol=1e-12)
    x = np.random.default_rng(0).random(1000)
    np.testing.assert_allclose(a.predict(x), b.predict(x), atol=1e-12)


def test_beta_mean_option_uses_the_posterior_mean():
    s, y = make(500, 14)
    cal = BBQ(bin_estimate="beta_mean").fit(s, y)
    order = np.argsort(s)
    B = int(cal.n_bins_[0])
    bins = naive_bins(s[order], B)
    cuts = [(s[order][e - 1] + s[order][e]) / 2 for _, e in bins[:-1]]
    edges = [0.0] + cuts + [1.0]
    expect = []
    for b, (st, en) in enumerate(bins):
        p = min(max((edges[b] + edges[b + 1]) / 2, 0.005), 0.995)
        expect.append((y[order][st:en].sum() + 2 * p) / (en - st + 2))
    np.testing.assert_allclose(cal.models_[0].values, expect, rtol=1e-12)
    # the default differs from it
    assert not np.allclose(BBQ().fit(s, y).models_[0].values, expect)


def test_json_round_trip():
    s, y = make(700, 15)
    cal = BBQ(alpha=0.01).fit(s, y)
    back = BBQ.from_json(cal.to_json())
    x = np.concatenate([np.linspace(-1, 2, 5001), cal.map_.thresholds])
    assert np.array_equal(back.predict(x), cal.predict(x))
    assert back.get_params() == cal.get_params() and isinstance(back.map_, StepMap)


@pytest.mark.parametrize("params,match", [({"alpha": -1.0}, "alpha"), ({"alpha": "x"}, "alpha"),
                                          ({"bin_estimate": "mean"}, "bin_estimate")])
def test_bad_parameters_are_named(params, match):
    s, y = make(50, 0)
    with pytest.raises(ValueError, match=match):
        BBQ(**params).fit(s, y)


def test_bin_range_capped_at_unique_scores_so_cost_follows_distinct_scores():
    # 40 distinct scores as pre-aggregated counts of 1e9 rows each: the authors' range would be
    # B = 34..34200 (each model O(B)); capped at M = 40 the fit is as cheap as 40 unit rows
    rng = np.random.default_rng(11)
    s = np.sort(rng.random(40))
    y = (rng.random(40) < s).astype(int)
    for scale in (1e9, 1e300):
        cal = BBQ().fit(s, y, sample_weight=np.full(40, scale))
        assert cal.candidate_n_bins_.max() <= 40
        assert np.isfinite(cal.map_.values).all()
    # with unit weights and unique scores the paper's range is unchanged (ceil(N/5) < M)
    cal = BBQ().fit(np.linspace(0.01, 0.99, 500), np.arange(500) % 2)
    assert (cal.candidate_n_bins_[0], cal.candidate_n_bins_[-1]) == (1, 80)
