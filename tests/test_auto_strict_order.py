"""auto's opt-in ``strict_order`` (docs/auto.md, "AUC on imbalanced data"): the chosen
piecewise-linear map made strictly increasing. Checked against brute-force pair counts of the
held-out ordering, the per-row log-loss bound, hand-written knot values, the unchanged
selection, documents, and parameter errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import mlcal
from mlcal.calibrators._params import InvalidParameterError
from mlcal.calibrators.auto import strictly_increasing
from mlcal.maps.binary import LinearMap

EPS = 1e-6


def imbalanced(n: int, seed: int):
    """Scores of a linear model on rare positives with 5% random labels: the calibration curve
    has a floor (flat for most rows), where isotonic regression pools into one flat step."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.5, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-z))).astype(int)
    flip = rng.random(n) < 0.05
    y[flip] = rng.random(flip.sum()) < 0.5
    return 1.0 / (1.0 + np.exp(-z)), y


def pairs_ordered(s, p, y):
    """Brute force over every (positive, negative) pair: the count the scores order strictly
    and the map does not order the same way (ties or reversals)."""
    sp, sn = s[y == 1][:, None], s[y == 0][None, :]
    pp, pn = p[y == 1][:, None], p[y == 0][None, :]
    return int(np.sum((sp > sn) & ~(pp > pn)) + np.sum((sp < sn) & ~(pp < pn)))


def projection(m, s):
    """The non-decreasing knot values nearest to ``m``'s in squared error, each knot weighted
    by the calibration rows nearest to it (brute force, scikit-learn's isotonic regression)."""
    from sklearn.isotonic import IsotonicRegression
    from mlcal.maps._core import apply_input_transform

    if np.all(np.diff(m.values) >= 0):
        return m.values
    x = apply_input_transform(np.asarray(s, dtype=float), m.input_transform)
    near = np.argmin(np.abs(x[:, None] - m.knots[None, :]), axis=1)
    mass = np.bincount(near, minlength=m.size).astype(float)
    mass += 1e-9 * mass.mean()
    return IsotonicRegression().fit(np.arange(m.size), m.values, sample_weight=mass).predict(
        np.arange(m.size))


def test_knot_values_by_hand():
    m = LinearMap([0.1, 0.2, 0.3, 0.4], [0.05, 0.05, 0.02, 0.6])
    eps = 0.01
    # equal knot weights: the dip pools 0.05, 0.05, 0.02 into 0.04; ramp 1/5 .. 4/5
    got = strictly_increasing(m, eps)
    want = [0.99 * 0.04 + 0.01 * 0.2, 0.99 * 0.04 + 0.01 * 0.4,
            0.99 * 0.04 + 0.01 * 0.6, 0.99 * 0.6 + 0.01 * 0.8]
    assert np.allclose(got.values, want, rtol=0, atol=1e-15)
    assert np.array_equal(got.knots, m.knots)
    assert np.all(np.diff(got.values) > 0)
    # weighted by the scores nearest each knot: 3 rows at 0.1, one at 0.2, none at 0.3 (1e-9
    # of the mean weight 1.5 added to every knot), 2 at 0.4
    s = [0.09, 0.1, 0.12, 0.21, 0.38, 0.5]
    pooled = (3 * 0.05 + 0.05 + 1.5e-9 * (0.05 + 0.05 + 0.02)) / (4 + 3 * 1.5e-9)
    got = strictly_increasing(m, eps, s)
    assert np.allclose(got.values[:3], [0.99 * pooled + 0.01 * r for r in (0.2, 0.4, 0.6)],
                       rtol=0, atol=1e-15)
    # a non-decreasing map: the ramp alone
    inc = LinearMap([0.1, 0.2, 0.3], [0.1, 0.1, 0.5])
    assert np.allclose(strictly_increasing(inc, eps, s).values,
                       [0.99 * 0.1 + 0.0025, 0.99 * 0.1 + 0.005, 0.99 * 0.5 + 0.0075],
                       rtol=0, atol=1e-15)
    # other map kinds and one-knot maps are left alone
    one = LinearMap([0.5], [0.3])
    assert strictly_increasing(one, eps) is one
    sig = mlcal.get_calibrator("platt").fit([0.1, 0.4, 0.6, 0.9], [0, 1, 0, 1]).map_
    assert strictly_increasing(sig, eps) is sig


@pytest.mark.parametrize("method", ["isotonic", "elite", "spline"])
def test_held_out_order_kept_and_log_loss_bound(method):
    s, y = imbalanced(1500, 0)
    s_te, y_te = imbalanced(3000, 1)
    plain = mlcal.AutoCalibrator(candidates=[method], anchor=None).fit(s, y)
    strict = mlcal.AutoCalibrator(candidates=[method], anchor=None, strict_order=EPS).fit(s, y)
    assert strict.chosen_ == plain.chosen_ == method
    assert strict.selection_ == plain.selection_
    lo, hi = strict.map_.knots[0], strict.map_.knots[-1]
    inside = (s_te > lo) & (s_te < hi)
    p0, p1 = plain.predict(s_te), strict.predict(s_te)
    # between the end knots the strict map orders every pair as the scores do
    assert pairs_ordered(s_te[inside], p1[inside], y_te[inside]) == 0
    if method == "isotonic":   # the plain map's flat steps tie pairs there
        assert pairs_ordered(s_te[inside], p0[inside], y_te[inside]) > 0
    # within eps of the projected map, and each row's log loss at most -log(1 - eps) worse
    projected = dataclasses.replace(plain.map_, values=projection(plain.map_, s))
    assert np.max(np.abs(p1 - projected(s_te))) <= EPS + 1e-12
    loss = lambda p: np.where(y_te == 1, -np.log(p), -np.log1p(-p))  # noqa: E731
    assert np.all(loss(p1) - loss(projected(s_te)) <= -np.log1p(-EPS) + 1e-12)
    if method != "elite":   # non-decreasing maps: only the ramp moves them
        assert np.array_equal(projected.values, plain.map_.values)


def test_selection_and_other_maps_unchanged():
    s, y = imbalanced(800, 2)
    plain = mlcal.AutoCalibrator().fit(s, y)
    strict = mlcal.AutoCalibrator(strict_order=EPS).fit(s, y)
    assert strict.selection_ == plain.selection_
    x = np.linspace(0.0, 1.0, 501)
    if plain.map_.kind != "linear":
        assert np.array_equal(strict.predict(x), plain.predict(x))
    platt = mlcal.AutoCalibrator(candidates=["platt"], anchor=None, strict_order=EPS).fit(s, y)
    assert platt.map_ == mlcal.AutoCalibrator(candidates=["platt"], anchor=None).fit(s, y).map_


def test_document_round_trip():
    s, y = imbalanced(1000, 3)
    cal = mlcal.AutoCalibrator(candidates=["isotonic"], anchor=None, strict_order=EPS).fit(s, y)
    back = mlcal.load_calibrator(cal.to_json())
    assert back.get_params() == cal.get_params()
    x = np.linspace(0.0, 1.0, 1001)
    assert np.array_equal(back.predict(x), cal.predict(x))
    assert back.to_json() == cal.to_json()


@pytest.mark.parametrize("bad", [0.0, 1e-12, 0.5, -1.0, "1e-6"])
def test_bad_strict_order(bad):
    s, y = imbalanced(200, 4)
    with pytest.raises(InvalidParameterError, match="strict_order"):
        mlcal.AutoCalibrator(strict_order=bad).fit(s, y)


def test_java_evaluator_reads_strict_order_documents(jar, tmp_path):
    from tests.test_java_evaluator import assert_bits_equal, run_batch

    s, y = imbalanced(1500, 5)
    cal = mlcal.AutoCalibrator(candidates=["isotonic", "elite"], anchor=None,
                               strict_order=EPS).fit(s, y)
    x = np.concatenate([np.linspace(0.0, 1.0, 2001), [1e-300, 1 - 1e-16]])
    out = run_batch(jar, tmp_path, [(cal.to_json(), x)])
    assert_bits_equal(out[0], cal.predict(x), "auto with strict_order")
