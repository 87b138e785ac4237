"""``bound_smoothing``: binning, isotonic-type and spline maps kept off exactly 0 and 1."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

import mlcal
from mlcal.calibrators._params import InvalidParameterError
from support.synthetic import calibration_set

SMOOTHED = ["histogram", "isotonic", "bbq", "sbb", "abb", "enir", "elite", "kde", "spline"]
GRID = np.linspace(-0.5, 1.5, 2001)


def separable(n=600, seed=0):
    """Scores whose low and high ends hold a single class: isotonic, histogram, KDE and ELiTE
    all fit exactly 0 there, and 1 at the top."""
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = (rng.random(n) < np.clip(2.0 * s - 0.5, 0.0, 1.0)).astype(int)
    return s, y


def test_every_binning_or_isotonic_method_declares_the_option():
    for name in SMOOTHED:
        assert mlcal.get_calibrator(name).get_params()["bound_smoothing"] is None


@pytest.mark.parametrize("name", SMOOTHED)
@pytest.mark.parametrize("a", [0.5, 2.0])
@pytest.mark.usefixtures("without_output_floor")
def test_outputs_never_exactly_zero_or_one(name, a):
    s, y = separable()
    cal = mlcal.get_calibrator(name, bound_smoothing=a).fit(s, y)
    p = cal.predict(np.concatenate((GRID, s)))
    assert p.min() > 0.0 and p.max() < 1.0


@pytest.mark.usefixtures("without_output_floor")
def test_the_data_does_reach_the_bounds_without_the_option():
    # otherwise the test above could not fail for these methods (both without the output
    # floor, which alone would keep them off 0 and 1)
    s, y = separable()
    for name in ["histogram", "isotonic", "kde", "elite", "spline"]:
        p = mlcal.get_calibrator(name).fit(s, y).predict(GRID)
        assert p.min() == 0.0 or p.max() == 1.0, name


@pytest.mark.parametrize("name", SMOOTHED)
@pytest.mark.usefixtures("without_output_floor")
def test_values_off_the_bounds_are_kept_bit_for_bit(name):
    s, y = separable(seed=3)
    plain = mlcal.get_calibrator(name).fit(s, y)
    smooth = mlcal.get_calibrator(name, bound_smoothing=1.0).fit(s, y)
    p, q = plain.predict(GRID), smooth.predict(GRID)
    inside = (p > 0.0) & (p < 1.0)
    if type(plain.map_) is mlcal.StepMap:   # a LinearMap's segments next to a moved knot move
        assert np.array_equal(p[inside], q[inside])
    assert np.array_equal(plain.map_.values[(plain.map_.values > 0) & (plain.map_.values < 1)],
                          smooth.map_.values[(plain.map_.values > 0) & (plain.map_.values < 1)])


def test_isotonic_runs_take_the_beta_posterior_mean_of_their_block():
    # blocks from scikit-learn's isotonic fit, expected values by hand:
    # [0 0 0] -> 0, [1 0] -> 0.5, [1 1 1 1 1] -> 1; with a = 1: 1/5 and 6/7
    s = np.arange(10.0)
    y = np.array([0, 0, 0, 1, 0, 1, 1, 1, 1, 1])
    ref = IsotonicRegression().fit(s, y).predict(s)
    assert ref.tolist() == [0, 0, 0, 0.5, 0.5, 1, 1, 1, 1, 1]
    for interpolate in (True, False):
        cal = mlcal.Isotonic(interpolate=interpolate, bound_smoothing=1.0).fit(s, y)
        assert cal.predict(s).tolist() == pytest.approx([0.2] * 3 + [0.5] * 2 + [6 / 7] * 5)
        assert cal.predict([-100.0, 100.0]).tolist() == pytest.approx([0.2, 6 / 7])


def test_a_small_zero_run_is_clipped_to_its_neighbour():
    # blocks [0] -> 0 and [1 0 0 0] -> 0.25: a/(n+2a) = 1/3 > 0.25 would break monotonicity
    s = np.arange(5.0)
    y = np.array([0, 1, 0, 0, 0])
    assert IsotonicRegression().fit(s, y).predict(s).tolist() == [0, 0.25, 0.25, 0.25, 0.25]
    cal = mlcal.Isotonic(interpolate=False, bound_smoothing=1.0).fit(s, y)
    assert cal.predict(s).tolist() == [0.25] * 5


def test_separated_classes_give_a_zero_run_below_a_one_run():
    s = np.arange(7.0)
    y = np.array([0, 0, 0, 1, 1, 1, 1])
    cal = mlcal.Isotonic(bound_smoothing=0.5).fit(s, y)
    assert cal.predict([0.0, 6.0]).tolist() == pytest.approx([0.5 / 4, 4.5 / 5])


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("name, params", [("isotonic", {}), ("isotonic", {"interpolate": False}),
                                          ("sbb", {}), ("histogram", {"n_bins": 40}),
                                          ("spline", {})])
def test_non_decreasing_maps_stay_non_decreasing(seed, name, params):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    s = np.round(rng.random(n), int(rng.integers(1, 4)))
    y = (rng.random(n) < s ** rng.uniform(0.2, 5.0)).astype(int)
    y[0], y[-1] = 0, 1
    a = float(rng.choice([0.01, 0.5, 1.0, 10.0]))
    plain = mlcal.get_calibrator(name, **params).fit(s, y)
    smooth = mlcal.get_calibrator(name, bound_smoothing=a, **params).fit(s, y)
    p = smooth.predict(GRID)
    assert p.min() > 0.0 and p.max() < 1.0
    if np.all(np.diff(plain.predict(GRID)) >= 0):
        assert np.all(np.diff(p) >= 0)


def test_huge_weights_still_stay_below_one():
    # (n + a) / (n + 2a) rounds to 1 once n / a > 2**53; the value is then the largest double < 1
    s, y = separable()
    cal = mlcal.Isotonic(bound_smoothing=0.5).fit(s, y, sample_weight=np.full(s.size, 1e17))
    p = cal.predict(GRID)
    assert p.min() > 0.0 and p.max() == np.nextafter(1.0, 0.0)


def test_row_order_does_not_matter():
    s, y, w = calibration_set(2000, 5, beta=(0.5, 0.5), decimals=2, weights="fractional")
    docs = set()
    for k in range(3):
        p = np.random.default_rng(k).permutation(s.size) if k else np.arange(s.size)
        docs.add(mlcal.HistogramBinning(n_bins=60, bound_smoothing=0.5)
                 .fit(s[p], y[p], sample_weight=w[p]).to_json())
    assert len(docs) == 1


def test_json_round_trip_keeps_the_parameter():
    s, y = separable()
    cal = mlcal.ENIR(bound_smoothing=0.5).fit(s, y)
    back = mlcal.load_calibrator(cal.to_json())
    assert back.bound_smoothing == 0.5
    assert np.array_equal(back.predict(GRID), cal.predict(GRID))


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, float("inf"), "yes", True])
def test_bad_values_are_named(bad):
    s, y = separable()
    with pytest.raises(InvalidParameterError, match="bound_smoothing"):
        mlcal.Isotonic(bound_smoothing=bad).fit(s, y)
