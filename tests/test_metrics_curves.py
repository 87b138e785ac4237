"""Calibration slope/intercept against direct likelihood maximisation with scipy, numerical
Hessians and the profile-likelihood definition; the loess curve and ICI/E50/E90 against a
brute-force per-point weighted least-squares fit."""

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, logit
from scipy.stats import chi2

from mlcal.metrics import (calibration_slope_intercept, classwise_ici,
                           integrated_calibration_index, loess_calibration_curve, top_label_ici)


def _sim(seed, n, a=0.0, b=1.0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    y = (rng.uniform(size=n) < expit(a + b * logit(p))).astype(float)
    return y, p


def _nll(theta, z, y, w):
    eta = theta[0] + theta[1] * z
    return -float(np.sum(w * (y * eta - np.logaddexp(0.0, eta))))


@pytest.mark.parametrize("seed", range(3))
def test_slope_and_intercepts_match_direct_maximisation(seed):
    y, p = _sim(seed, 300, a=0.4, b=0.7)
    w = np.random.default_rng(seed + 10).integers(1, 4, y.size).astype(float)
    z = logit(p)
    r = calibration_slope_intercept(y, p, sample_weight=w)
    ref = minimize(_nll, [0.0, 1.0], args=(z, y, w), method="Nelder-Mead",
                   options={"xatol": 1e-11, "fatol": 1e-13, "maxiter": 20000}).x
    assert r.intercept_with_slope == pytest.approx(ref[0], abs=1e-7)
    assert r.slope == pytest.approx(ref[1], abs=1e-7)
    cil = minimize_scalar(lambda a: _nll([a, 1.0], z, y, w), bracket=(-1, 1), tol=1e-12).x
    assert r.calibration_intercept == pytest.approx(cil, abs=1e-6)
    # frequency weights: the same as repeating the rows
    rep = calibration_slope_intercept(np.repeat(y, w.astype(int)), np.repeat(p, w.astype(int)))
    assert rep.slope == pytest.approx(r.slope, rel=1e-10)
    assert rep.slope_profile == pytest.approx(r.slope_profile, rel=1e-8)


def test_wald_errors_match_a_numerical_hessian():
    y, p = _sim(4, 500, a=-0.3, b=1.3)
    z, w = logit(p), np.ones(y.size)
    r = calibration_slope_intercept(y, p, confidence=0.9)
    theta, h = np.array([r.intercept_with_slope, r.slope]), 1e-4
    hess = np.empty((2, 2))
    for i in range(2):
        for j in range(2):
            ei, ej = np.eye(2)[i] * h, np.eye(2)[j] * h
            hess[i, j] = (_nll(theta + ei + ej, z, y, w) - _nll(theta + ei - ej, z, y, w)
                          - _nll(theta - ei + ej, z, y, w) + _nll(theta - ei - ej, z, y, w)) / (4 * h * h)
    cov = np.linalg.inv(hess)
    assert r.intercept_with_slope_se == pytest.approx(np.sqrt(cov[0, 0]), rel=1e-4)
    assert r.slope_se == pytest.approx(np.sqrt(cov[1, 1]), rel=1e-4)
    q = 1.6448536269514722  # z_0.95 for a two-sided 90 % interval
    assert r.slope_wald == pytest.approx((r.slope - q * r.slope_se, r.slope + q * r.slope_se))


def test_profile_bounds_satisfy_their_definition():
    y, p = _sim(5, 400, a=0.2, b=0.8)
    z, w = logit(p), np.ones(y.size)
    r = calibration_slope_intercept(y, p)
    ll_max = -_nll([r.intercept_with_slope, r.slope], z, y, w)
    target = chi2.ppf(0.95, 1)
    for b in r.slope_profile:
        prof = -minimize_scalar(lambda a: _nll([a, b], z, y, w), bracket=(-2, 2), tol=1e-12).fun
        assert 2 * (ll_max - prof) == pytest.approx(target, rel=1e-6)
    ll_cil = -_nll([r.calibration_intercept, 1.0], z, y, w)
    for a in r.calibration_intercept_profile:
        assert 2 * (ll_cil + _nll([a, 1.0], z, y, w)) == pytest.approx(target, rel=1e-6)
    lo, hi = r.slope_profile
    assert lo < r.slope < hi


def test_recovers_known_miscalibration():
    y, p = _sim(6, 6000)                       # calibrated
    r = calibration_slope_intercept(y, p)
    assert abs(r.slope - 1) < 0.1 and abs(r.calibration_intercept) < 0.1
    over = expit(2.0 * logit(p))               # too extreme: slope 1/2
    assert calibration_slope_intercept(y, over).slope == pytest.approx(0.5, abs=0.05)
    low = expit(logit(p) - 1.0)                # too low by one logit: intercept +1
    r = calibration_slope_intercept(y, low)
    assert r.calibration_intercept == pytest.approx(1.0, abs=0.1)
    assert r.slope == pytest.approx(1.0, abs=0.1)
    assert set(r.as_dict()) >= {"slope", "slope_wald", "calibration_intercept_profile"}


def test_slope_intercept_bad_input():
    with pytest.raises(ValueError, match="exactly 0 or 1.*eps"):
        calibration_slope_intercept([0, 1, 1], [0.0, 0.5, 0.7])
    r = calibration_slope_intercept([0, 1, 0, 1], [0.0, 0.6, 0.7, 0.4], eps=1e-3)
    assert np.isfinite(r.slope)
    with pytest.raises(ValueError, match="both labels"):
        calibration_slope_intercept([1, 1, 1], [0.2, 0.5, 0.7])
    for y in ([0, 0, 1, 1], [1, 1, 0, 0], [0, 1, 0, 1]):   # the last one only quasi-separated
        with pytest.raises(ValueError, match="separated"):
            calibration_slope_intercept(y, [0.1, 0.2, 0.2, 0.9])
    with pytest.raises(ValueError, match="confidence"):
        calibration_slope_intercept([0, 1], [0.2, 0.7], confidence=95)


def _brute_loess(y, p, x, span=0.75, degree=2):
    q = int(np.floor(span * p.size))
    out = []
    for x0 in x:
        d = np.abs(p - x0)
        dq = np.sort(d)[q - 1]
        k = np.where(d < dq, (1 - (d / dq) ** 3) ** 3, 0.0) if dq > 0 else (d == 0) * 1.0
        design = np.vander(p - x0, degree + 1, increasing=True) * np.sqrt(k)[:, None]
        out.append(np.linalg.lstsq(design, y * np.sqrt(k), rcond=None)[0][0])
    return np.array(out)


@pytest.mark.parametrize("span,degree,decimals", [(0.75, 2, 2), (0.3, 1, 3), (0.5, 2, 8)])
def test_loess_matches_brute_force(span, degree, decimals):
    rng = np.random.default_rng(7)
    p = np.round(rng.uniform(0, 1, 250), decimals)
    y = (rng.uniform(size=p.size) < p ** 1.5).astype(float)
    x = np.concatenate((np.linspace(0, 1, 11), p[:20]))
    np.testing.assert_allclose(loess_calibration_curve(y, p, x, span=span, degree=degree),
                               _brute_loess(y, p, x, span, degree), atol=1e-10)


def test_ici_summaries_match_brute_force():
    rng = np.random.default_rng(8)
    p = rng.uniform(0, 1, 180)
    y = (rng.uniform(size=p.size) < p ** 1.3).astype(float)
    err = np.abs(p - _brute_loess(y, p, p))
    r = integrated_calibration_index(y, p)
    assert r.ici == pytest.approx(err.mean(), rel=1e-9)
    assert r.e50 == pytest.approx(np.median(err), rel=1e-9)
    assert r.e90 == pytest.approx(np.quantile(err, 0.9), rel=1e-9)
    assert r.emax == pytest.approx(err.max(), rel=1e-9)


def test_ici_interpolated_curve_is_close_to_the_exact_one():
    rng = np.random.default_rng(9)
    p = rng.uniform(0, 1, 3000)                # > EXACT_CURVE_POINTS distinct forecasts
    y = (rng.uniform(size=p.size) < p ** 1.5).astype(float)
    err = np.abs(p - loess_calibration_curve(y, p))
    r = integrated_calibration_index(y, p)
    assert r.ici == pytest.approx(err.mean(), abs=1e-5)
    assert r.e90 == pytest.approx(np.quantile(err, 0.9), abs=1e-5)
    # s(p) ~ p^1.5 here, and the mean of p - p^1.5 over U(0, 1) is 1/2 - 2/5 = 0.1
    assert r.ici == pytest.approx(0.1, abs=0.015)
    y_cal = (rng.uniform(size=p.size) < p).astype(float)
    assert integrated_calibration_index(y_cal, p).ici < 0.03


def test_ici_multiclass_forms_and_errors():
    rng = np.random.default_rng(10)
    prob = rng.dirichlet(np.ones(3), 200)
    y = np.array([rng.choice(3, p=r) for r in prob])
    top = np.argmax(prob, axis=1)
    assert top_label_ici(y, prob) == integrated_calibration_index((top == y) * 1.0,
                                                                  prob.max(axis=1))
    cw = classwise_ici(y, prob)
    assert cw[1] == integrated_calibration_index((y == 1) * 1.0, prob[:, 1])
    with pytest.raises(ValueError, match="span"):
        loess_calibration_curve([0, 1], [0.2, 0.7], span=1.5)
    with pytest.raises(ValueError, match="degree"):
        loess_calibration_curve([0, 1], [0.2, 0.7], degree=3)
