"""auto's per-unit held-out losses (one compiled pass) against their array expression."""

import math

import numpy as np

from mlcal._solvers.detmath import clipped_neg_log_pair, det_log_array
from mlcal.calibrators.auto import EPS, _row_log_losses


def _reference(p):
    q = np.clip(p, EPS, 1.0 - EPS)
    return -det_log_array(q), -det_log_array(1.0 - q)


def test_same_bits_as_the_array_expression():
    rng = np.random.default_rng(0)
    smooth = rng.random(5000)
    steps = np.repeat(rng.random(40), rng.integers(1, 200, 40))   # a step map's runs
    edges = np.array([0.0, -0.0, 1.0, 1e-300, 5e-324, 1e-16, 1.0 - 1e-16, 0.5, 0.5, 1e-15,
                      1.0 - 1e-15, 2.0, -3.0, np.inf, -np.inf])
    for p in (smooth, steps, edges, np.empty(0), np.array([0.3])):
        got = _row_log_losses(p)
        want = _reference(p)
        for g, w in zip(got, want):
            assert g.dtype == np.float64 and g.shape == p.shape
            assert np.array_equal(g.view(np.int64), w.view(np.int64))


def test_nan_kept_and_values_are_the_logs():
    p = np.array([0.25, np.nan, np.nan, 0.75])
    lp, lq = clipped_neg_log_pair(p, EPS, 1.0 - EPS)
    assert np.isnan(lp[1:3]).all() and np.isnan(lq[1:3]).all()
    assert math.isclose(lp[0], -math.log(0.25), rel_tol=1e-15)
    assert math.isclose(lq[0], -math.log(0.75), rel_tol=1e-15)
    assert math.isclose(lp[3], -math.log(0.75), rel_tol=1e-15)
    assert math.isclose(lq[3], -math.log(0.25), rel_tol=1e-15)
