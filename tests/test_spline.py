"""Monotone spline: the QP against a generic bounded optimiser, the cross-validation against an
independent re-computation, and the map it produces."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from mlcal import LinearMap, MonotoneSpline
from mlcal.calibrators.spline import CV_CLIP, DEFAULT_PENALTIES
from support.synthetic import calibration_set


def hat_design(x, knots):
    """Dense hat-function design matrix (independent of the solver's accumulation)."""
    return np.column_stack([np.interp(x, knots, np.eye(knots.size)[j])
                            for j in range(knots.size)])


def objective_parts(x, y, w, knots, lam):
    """``F(theta) = sum w (y - B theta)^2 / sum w + lam |D2 theta|^2`` as (B, wn, D2)."""
    d2 = np.diff(np.eye(knots.size), n=2, axis=0)
    return hat_design(x, knots), w / w.sum(), d2


def scipy_fit(x, y, w, knots, lam):
    """The same objective minimised by L-BFGS-B over increments constrained >= 0; returns the
    minimum and the knot values."""
    b, wn, d2 = objective_parts(x, y, w, knots, lam)
    tri = np.tril(np.ones((knots.size, knots.size)))

    def f(u):
        theta = tri @ u
        r = y - b @ theta
        pen = d2 @ theta
        g_theta = -2 * b.T @ (wn * r) + 2 * lam * d2.T @ pen
        return np.sum(wn * r * r) + lam * np.sum(pen * pen), tri.T @ g_theta

    u0 = np.r_[np.average(y, weights=w), np.zeros(knots.size - 1)]
    res = minimize(f, u0, jac=True, method="L-BFGS-B",
                   bounds=[(None, None)] + [(0, None)] * (knots.size - 1),
                   options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 20000, "maxcor": 50})
    return res.fun, tri @ res.x


def objective(x, y, w, knots, lam, theta):
    b, wn, d2 = objective_parts(x, y, w, knots, lam)
    r = y - b @ theta
    return np.sum(wn * r * r) + lam * np.sum((d2 @ theta) ** 2)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lam", [1e-6, 1e-3, 0.1, 10.0])
@pytest.mark.usefixtures("without_output_floor")
def test_fit_is_optimal_against_a_generic_optimiser(seed, lam):
    s, y, w = calibration_set(150 + 50 * seed, seed, beta=(2, 2), link_power=2.5,
                              weights="fractional")
    cal = MonotoneSpline(penalties=[lam], n_knots=8 + seed).fit(s, y, sample_weight=w)
    knots, theta = cal.map_.knots, cal.coef_
    assert np.all(np.diff(theta) >= 0)
    assert np.array_equal(cal.map_.values, np.clip(theta, 0, 1))
    ours = objective(s, y, w, knots, lam, theta)
    assert ours <= scipy_fit(s, y, w, knots, lam)[0] + 1e-8


def cv_by_hand(s, y, w, knots, grid, k):
    """Cross-validated log loss per penalty, folds from the documented rule, each training
    fold refitted from scratch by scipy's optimiser."""
    x = np.unique(s)
    fold = np.searchsorted(x, s) % k
    out = []
    for lam in grid:
        total = 0.0
        for f in range(k):
            tr, ho = fold != f, fold == f
            _, theta = scipy_fit(s[tr], y[tr], w[tr], knots, lam)
            p = np.clip(np.interp(s[ho], knots, theta), CV_CLIP, 1 - CV_CLIP)
            total -= np.sum(w[ho] * (y[ho] * np.log(p) + (1 - y[ho]) * np.log1p(-p)))
        out.append(total / w.sum())
    return np.array(out)


def test_cross_validation_matches_an_independent_computation():
    s, y, w = calibration_set(400, 11, beta=(2, 3), decimals=3, link_power=2.0,
                              weights="integer")
    grid = [1e-5, 1e-3, 1e-1, 10.0, 1000.0]
    cal = MonotoneSpline(penalties=grid, n_knots=10, cv=4).fit(s, y, sample_weight=w)
    expected = cv_by_hand(s, y, w, cal.map_.knots, grid, 4)
    np.testing.assert_allclose(cal.cv_log_loss_, expected, rtol=1e-7)
    assert cal.penalty_ == grid[int(np.argmin(expected))]
    assert np.ptp(expected) > 1e-4          # the grid really discriminates on this data


def test_recovers_a_known_monotone_link():
    s, y = calibration_set(40_000, 3, link_power=2.0)
    cal = MonotoneSpline().fit(s, y)
    grid = np.linspace(0.02, 0.98, 97)
    assert np.abs(cal.predict(grid) - grid ** 2).max() < 0.03
    assert isinstance(cal.map_, LinearMap) and cal.map_.input_transform == "identity"
    assert np.all(np.diff(cal.map_.values) >= 0) and cal.penalty_ in DEFAULT_PENALTIES


def test_map_is_exactly_the_spline():
    s, y = calibration_set(3000, 4, beta=(1, 3), decimals=4)
    cal = MonotoneSpline(n_knots=15).fit(s, y)
    knots, theta = cal.map_.knots, cal.map_.values
    assert knots.size == 15 and knots[0] == s.min() and knots[-1] == s.max()
    x = np.linspace(-0.5, 1.5, 2001)
    assert np.array_equal(cal.predict(x), np.interp(x, knots, theta))


def test_integer_weights_equal_repeated_rows():
    s, y, w = calibration_set(500, 6, decimals=2, weights="integer")
    reps = w.astype(int)
    a = MonotoneSpline().fit(s, y, sample_weight=w)
    b = MonotoneSpline().fit(np.repeat(s, reps), np.repeat(y, reps))
    assert a.to_json() == b.to_json()


def test_raw_margins_fit_directly():
    rng = np.random.default_rng(2)
    m = rng.normal(0, 2, 3000)
    y = (rng.random(3000) < 1 / (1 + np.exp(-m))).astype(int)
    cal = MonotoneSpline().fit(m, y)
    assert cal.map_.input_transform == "identity" and cal.map_.knots[0] == m.min()
    p = cal.predict([-3.0, 0.0, 3.0])
    assert np.all(np.abs(p - 1 / (1 + np.exp(-np.array([-3.0, 0.0, 3.0])))) < 0.08)


@pytest.mark.parametrize("scores,y,n_knots", [
    ([0.3, 0.3, 0.3], [0, 1, 1], 1),                 # one distinct score: the mean label
    ([0.1, 0.5, 0.9, 0.9], [0, 1, 0, 1], 2),         # fewer scores than folds: no CV
])
def test_few_distinct_scores(scores, y, n_knots):
    cal = MonotoneSpline().fit(scores, y)
    assert cal.map_.size == n_knots
    if n_knots == 1:
        assert cal.predict([0.0, 0.3, 1.0]).tolist() == [2 / 3] * 3


@pytest.mark.parametrize("params,msg", [({"penalties": [1.0, -1.0]}, "penalties"),
                                        ({"penalties": []}, "penalties"),
                                        ({"n_knots": 1}, "n_knots"), ({"cv": 1}, "cv")])
def test_bad_parameters_are_named(params, msg):
    with pytest.raises(ValueError, match=msg):
        MonotoneSpline(**params).fit([0.1, 0.5, 0.9], [0, 1, 1])
