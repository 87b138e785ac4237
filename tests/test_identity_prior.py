"""``identity_prior`` of platt-logit and temperature: pseudo-rows labelled with the base model's
own probabilities, i.e. the cross-entropy plus ``m`` times the mean KL divergence from the base
probabilities, checked against a direct minimisation with scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit

import mlcal
from mlcal.calibrators._params import InvalidParameterError
from mlcal.maps import BETA_EPS


def data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.beta(2.0, 3.0, size=n)
    y = (rng.random(n) < s ** 1.6).astype(float)
    return s, y


def direct(z, y, base, prior, intercept):
    """argmin over (k >= 0, c) of sum CE(y, eta) + prior * mean CE(base, eta) (scipy)."""
    n = z.size

    def f(th):
        k, c = th[0], (th[1] if intercept else 0.0)
        eta = k * z + c
        ce = lambda t: -(t * log_expit(eta) + (1 - t) * log_expit(-eta))   # noqa: E731
        return np.sum(ce(y)) + prior / n * np.sum(ce(base))
    res = minimize(f, np.array([1.0, 0.0]), method="L-BFGS-B",
                   bounds=[(0, None), (None, None) if intercept else (0, 0)],
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 1000})
    return res.x


@pytest.mark.parametrize("method,intercept", [("platt-logit", True), ("temperature", False)])
@pytest.mark.parametrize("prior", [5.0, 100.0, 1000.0])
def test_matches_the_penalised_objective_minimised_by_scipy(method, intercept, prior):
    s, y = data()
    cal = mlcal.get_calibrator(method, identity_prior=prior, smooth_targets=False).fit(s, y)
    sc = np.clip(s, BETA_EPS, 1 - BETA_EPS)
    z = np.log(sc) - np.log1p(-sc)
    k, c = direct(z, y, sc, prior, intercept)
    assert cal.map_.a == pytest.approx(k, rel=1e-5, abs=1e-7)
    assert cal.map_.c == pytest.approx(c, rel=1e-5, abs=1e-7)


def test_margins_use_the_sigmoid_of_the_margin_as_base_probability():
    s, y = data(seed=1)
    m = np.log(s) - np.log1p(-s)   # margins: the same model on the log-odds directly
    cal = mlcal.get_calibrator("platt-logit", identity_prior=50.0, smooth_targets=False).fit(m, y)
    k, c = direct(m, y, expit(m), 50.0, True)
    assert isinstance(cal.map_, mlcal.SigmoidMap)
    assert -cal.map_.a == pytest.approx(k, rel=1e-5) and -cal.map_.b == pytest.approx(c, abs=1e-6)


def test_limits_zero_is_the_plain_fit_and_a_huge_prior_the_identity():
    s, y = data(seed=2)
    plain = mlcal.get_calibrator("platt-logit", smooth_targets=False).fit(s, y).map_
    assert mlcal.get_calibrator("platt-logit", identity_prior=0.0,
                                smooth_targets=False).fit(s, y).map_ == plain
    big = mlcal.get_calibrator("platt-logit", identity_prior=1e12, smooth_targets=False).fit(s, y)
    assert big.map_.a == pytest.approx(1.0, abs=1e-6) and big.map_.c == pytest.approx(0.0, abs=1e-6)
    # the slope moves monotonically from the plain fit's toward 1 as the prior grows
    slopes = [mlcal.get_calibrator("platt-logit", identity_prior=m, smooth_targets=False)
              .fit(s, y).map_.a for m in (0.0, 10.0, 100.0, 1000.0)]
    assert all(abs(a - 1.0) > abs(b - 1.0) for a, b in zip(slopes, slopes[1:]))


def test_separable_labels_get_a_finite_fit_with_the_prior():
    s = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="separable"):
        mlcal.get_calibrator("platt-logit", smooth_targets=False).fit(s, y)
    cal = mlcal.get_calibrator("platt-logit", identity_prior=100.0, smooth_targets=False).fit(s, y)
    assert np.isfinite(cal.map_.a) and 1.0 < cal.map_.a < 50.0


def test_row_order_and_weights_as_counts():
    s, y = data(300, seed=3)
    ref = mlcal.get_calibrator("platt-logit", identity_prior=30.0).fit(s, y)
    for seed in range(3):
        o = np.random.default_rng(seed).permutation(s.size)
        again = mlcal.get_calibrator("platt-logit", identity_prior=30.0).fit(s[o], y[o])
        assert again.to_json() == ref.to_json()
    # doubling every row is weight 2: the prior is in rows of weight, so it halves in effect
    w2 = mlcal.get_calibrator("platt-logit", identity_prior=60.0).fit(s, y, sample_weight=np.full(
        s.size, 2.0))
    rep = mlcal.get_calibrator("platt-logit", identity_prior=60.0).fit(np.repeat(s, 2),
                                                                       np.repeat(y, 2))
    assert w2.map_.a == pytest.approx(rep.map_.a, rel=1e-9)


def test_bad_values_are_refused_and_documents_round_trip():
    s, y = data(200, seed=4)
    for bad in (-1.0, float("inf"), float("nan"), "10"):
        with pytest.raises(InvalidParameterError, match="identity_prior"):
            mlcal.get_calibrator("temperature", identity_prior=bad).fit(s, y)
    cal = mlcal.get_calibrator("temperature", identity_prior=20.0).fit(s, y)
    back = mlcal.load_calibrator(cal.to_json())
    assert back.get_params()["identity_prior"] == 20.0 and back.map_ == cal.map_
