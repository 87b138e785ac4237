import numpy as np
import pytest
from scipy.optimize import minimize

from mlcal import Platt, SigmoidMap


def scipy_platt(f, y, w, smooth=True):
    """Direct maximum likelihood of 1/(1+exp(a f + b)) against (smoothed) targets."""
    n_pos = np.dot(w, y)
    n_neg = w.sum() - n_pos
    t = np.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2)) if smooth else y

    def nll(theta):
        z = theta[0] * f + theta[1]
        return np.dot(w, np.logaddexp(0, z) - (1 - t) * z)

    def grad(theta):
        z = theta[0] * f + theta[1]
        r = w * (t - 1 / (1 + np.exp(z)))
        return np.array([np.dot(r, f), r.sum()])

    res = minimize(nll, [0.0, 0.0], jac=grad, method="BFGS", options={"gtol": 1e-12, "maxiter": 10000})
    return res.x


@pytest.mark.parametrize("seed", range(6))
def test_platt_equals_direct_maximum_likelihood(seed):
    rng = np.random.default_rng(seed)
    n = 500
    y = (rng.random(n) < 0.4).astype(float)
    f = rng.normal(loc=2.0 * y - 1.0, scale=1.5)  # raw margins
    w = rng.uniform(0.2, 2.0, n) if seed % 2 else np.ones(n)
    cal = Platt().fit(f, y, sample_weight=w)
    a, b = scipy_platt(f, y, w)
    assert isinstance(cal.map_, SigmoidMap)
    np.testing.assert_allclose([cal.map_.a, cal.map_.b], [a, b], atol=1e-6)


def test_platt_without_smoothing_matches_plain_likelihood():
    rng = np.random.default_rng(7)
    y = (rng.random(300) < 0.5).astype(float)
    f = rng.normal(loc=y, scale=1.0)
    cal = Platt(smooth_targets=False).fit(f, y)
    np.testing.assert_allclose([cal.map_.a, cal.map_.b], scipy_platt(f, y, np.ones(300), False),
                               atol=1e-6)


def test_separable_data_gives_finite_parameters_thanks_to_smoothed_targets():
    f = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
    y = np.array([0, 0, 0, 1, 1, 1.0])
    cal = Platt().fit(f, y)
    assert np.isfinite(cal.map_.a) and cal.map_.a < 0
    # the smoothed targets bound the fitted probabilities away from 0 and 1
    assert cal.predict([3.0])[0] < 1.0 and cal.predict([-3.0])[0] > 0.0


def test_platt_works_on_huge_margins_without_overflow():
    rng = np.random.default_rng(2)
    y = (rng.random(1000) < 0.5).astype(float)
    f = (2 * y - 1) * rng.uniform(100, 1000, 1000) + rng.normal(0, 300, 1000)
    p = Platt().fit(f, y).predict(f)
    assert np.isfinite(p).all()


# ------------------------------------------------------------------------------------------
# invariance (issue 15): affine rescaling of the scores, row order
# ------------------------------------------------------------------------------------------
def margins(n, seed):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(float)
    return rng.normal(2.0 * y - 1.0, 1.5), y


@pytest.mark.parametrize("c", [1e-12, 1e-8, 1.0, 1e8])
@pytest.mark.parametrize("d_over_c", [0.0, -2.5, 40.0])
def test_fit_is_invariant_to_affine_rescaling_of_the_scores(c, d_over_c):
    f, y = margins(20_000, 3)
    ref = Platt().fit(f, y)
    d = d_over_c * c
    cal = Platt().fit(c * f + d, y)
    t = np.linspace(-6, 6, 101)
    # tolerance: the rescaled scores themselves are rounded (relative 1e-16 of |c f| + |d|),
    # and A, B are mapped back with a few roundings; 1e-9 absolute leaves a wide margin over
    # that; the unstandardised solver was off by 4e-6 at c = 1e-8 and gave a constant map at
    # c = 1e-12 (off by 0.69)
    np.testing.assert_allclose(cal.predict(c * t + d), ref.predict(t), rtol=0, atol=1e-9)
    # and the parameters map back to the unscaled fit: A c = A_ref, B + A d = B_ref
    np.testing.assert_allclose(cal.map_.a * c, ref.map_.a, rtol=1e-9)
    np.testing.assert_allclose(cal.map_.b + cal.map_.a * d, ref.map_.b, rtol=0, atol=1e-9)


@pytest.mark.parametrize("c", [1e300, 1e-300])
def test_extreme_scales_neither_overflow_nor_underflow(c):
    f, y = margins(2_000, 4)
    ref = Platt().fit(f, y)
    cal = Platt().fit(c * f, y)
    np.testing.assert_allclose(cal.predict(c * f), ref.predict(f), rtol=0, atol=1e-12)


def test_subnormal_spread_is_a_clear_error():
    f, y = margins(200, 4)
    with pytest.raises(ValueError, match="too small for double precision"):
        Platt().fit(1e-320 * f, y)


def test_rescaled_fit_still_equals_direct_maximum_likelihood():
    f, y = margins(2_000, 5)
    w = np.ones(f.size)
    a, b = scipy_platt(f, y, w)
    cal = Platt().fit(1e-10 * f, y)
    np.testing.assert_allclose([cal.map_.a * 1e-10, cal.map_.b], [a, b], atol=1e-6)


def test_json_is_bit_identical_under_row_permutations():
    rng = np.random.default_rng(8)
    f, y = margins(50_000, 6)
    f = np.round(f, 2)  # many ties
    w = rng.uniform(0.5, 2.0, f.size)
    ref = Platt().fit(f, y, sample_weight=w).to_json()
    for _ in range(3):
        perm = rng.permutation(f.size)
        assert Platt().fit(f[perm], y[perm], sample_weight=w[perm]).to_json() == ref


def test_tied_rows_fit_like_their_weighted_point():
    f, y = margins(3_000, 9)
    f = np.round(f, 1)
    cal = Platt().fit(f, y)
    # the same data as distinct scores with integer weights (one row per (score, label) pair)
    keys, counts = np.unique(np.stack([f, y]), axis=1, return_counts=True)
    merged = Platt().fit(keys[0], keys[1], sample_weight=counts.astype(float))
    np.testing.assert_allclose([cal.map_.a, cal.map_.b], [merged.map_.a, merged.map_.b],
                               rtol=1e-12)


def test_newton_stops_in_few_iterations_at_a_million_rows():
    """Confident probability scores (3 % exactly 1.0) at 1M rows: the old solver's line search
    crawled below the objective's rounding error (100 iterations, 3233 objective evaluations,
    520 s). The optimum is checked by its first-order conditions, computed here in numpy."""
    n = 1_000_000
    rng = np.random.default_rng(0)
    f = rng.normal(-3.4, 1.2, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-f))).astype(float)
    s = 1 / (1 + np.exp(-(20 * f + 60)))
    cal = Platt().fit(s, y)
    assert cal.n_iter_ <= 20
    n_pos = y.sum()
    t = np.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n - n_pos + 2))
    r = t - cal.predict(s)
    g = (s - s.mean()) / s.std()
    assert abs(r.sum()) / n < 1e-10 and abs((r * g).sum()) / n < 1e-10
