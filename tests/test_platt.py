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
