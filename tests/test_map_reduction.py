"""The map-size cap: reduced maps are small, their recorded error is the true sup-norm distance
(checked by brute force on dense grids plus every original cut), step reductions are optimal,
and every calibrator applies the cap."""

from __future__ import annotations

import numpy as np
import pytest

import mlcal
from mlcal.calibrators._params import InvalidParameterError
from mlcal.calibrators.catalog import available_calibrators, calibrator_class
from mlcal.maps import DEFAULT_MAX_MAP_SIZE, LinearMap, SigmoidMap, StepMap, reduce_map


def probe_grid(breaks: np.ndarray, lo: float, hi: float, n: int = 20001) -> np.ndarray:
    """A dense grid over (and beyond) [lo, hi] plus every original cut and its two neighbours."""
    pad = 0.2 * (hi - lo) + 1.0
    return np.concatenate([np.linspace(lo - pad, hi + pad, n), breaks,
                           np.nextafter(breaks, -np.inf), np.nextafter(breaks, np.inf)])


def random_step_map(rng, n: int, kind: str) -> StepMap:
    t = np.sort(rng.uniform(-3, 3, n - 1))
    t = np.unique(t)
    k = t.size + 1
    if kind == "monotone":
        v = np.sort(rng.uniform(0, 1, k))
    elif kind == "noisy":
        v = np.clip(np.linspace(0.1, 0.9, k) + rng.normal(0, 0.05, k), 0, 1)
    else:
        v = rng.uniform(0, 1, k)
    return StepMap(t, v)


def optimal_step_error(v: np.ndarray, k: int) -> float:
    """Independent brute force: the smallest max |v_i - c_run| over all partitions of the bins
    into at most k runs (dynamic program, O(n^2 k)); a run's best constant is its mid-range."""
    n = v.size
    best = np.full((k + 1, n + 1), np.inf)
    best[0, 0] = 0.0
    for runs in range(1, k + 1):
        for j in range(1, n + 1):
            lo, hi = np.inf, -np.inf
            for i in range(j - 1, -1, -1):          # last run is bins i..j-1
                lo, hi = min(lo, v[i]), max(hi, v[i])
                cand = max(best[runs - 1, i], (hi - lo) / 2)
                best[runs, j] = min(best[runs, j], cand)
    return float(best[:, n].min())


@pytest.mark.parametrize("kind", ["monotone", "noisy", "random"])
@pytest.mark.parametrize("cap", [1, 2, 7, 40])
def test_step_reduction_error_is_the_true_sup_distance_and_optimal(kind, cap):
    rng = np.random.default_rng(cap)
    m = random_step_map(rng, 120, kind)
    red, info = reduce_map(m, cap)
    assert info.reduced and info.original_size == m.size and red.size == info.size <= cap
    assert np.isin(red.thresholds, m.thresholds).all()        # cuts are original cuts
    grid = probe_grid(m.thresholds, -3, 3)
    brute = float(np.abs(m(grid) - red(grid)).max())
    assert info.max_error == brute
    opt = optimal_step_error(m.values, cap)
    assert opt <= info.max_error <= opt * (1 + 2.0 ** -11) + 1e-16
    if kind == "monotone":
        assert (np.diff(red.values) >= 0).all()


def piecewise_linear(rng, n_pieces: int, n_knots: int) -> tuple[LinearMap, np.ndarray]:
    """A map with ``n_pieces`` true linear pieces sampled at ``n_knots`` extra collinear knots."""
    corners = np.sort(rng.uniform(0, 1, n_pieces + 1))
    corner_v = rng.uniform(0.05, 0.95, n_pieces + 1)
    x = np.unique(np.concatenate([corners, rng.uniform(corners[0], corners[-1], n_knots)]))
    return LinearMap(x, np.interp(x, corners, corner_v)), corners


def test_linear_reduction_finds_the_true_pieces():
    rng = np.random.default_rng(3)
    m, corners = piecewise_linear(rng, 6, 3000)
    red, info = reduce_map(m, 7)
    assert info.reduced and red.size == 7
    np.testing.assert_array_equal(red.knots, corners)
    assert info.max_error < 1e-12


@pytest.mark.parametrize("kind", ["monotone", "noisy", "random"])
@pytest.mark.parametrize("cap", [2, 5, 30, 200])
def test_linear_reduction_error_is_the_true_sup_distance(kind, cap):
    rng = np.random.default_rng(10 + cap)
    x = np.unique(rng.uniform(-2, 2, 1500))
    if kind == "monotone":
        v = np.sort(rng.uniform(0, 1, x.size))
    elif kind == "noisy":
        v = np.clip(1 / (1 + np.exp(-2 * x)) + rng.normal(0, 0.02, x.size), 0, 1)
    else:
        v = rng.uniform(0, 1, x.size)
    m = LinearMap(x, v, input_transform="identity", domain=(-2.0, 2.0))
    red, info = reduce_map(m, cap)
    assert red.size == info.size <= cap and info.original_size == x.size
    assert red.domain == m.domain
    idx = np.searchsorted(x, red.knots)
    np.testing.assert_array_equal(x[idx], red.knots)        # a subset of the knots ...
    np.testing.assert_array_equal(v[idx], red.values)       # ... with their original values
    assert red.knots[0] == x[0] and red.knots[-1] == x[-1]
    grid = probe_grid(x, -2, 2)
    brute = float(np.abs(m(grid) - red(grid)).max())
    assert brute == pytest.approx(info.max_error, rel=1e-12, abs=1e-15)
    if kind == "monotone":
        assert (np.diff(red.values) >= 0).all()
    assert info.max_error <= v.max() - v.min()          # never worse than the chord


def test_maps_within_the_cap_and_sigmoid_maps_are_unchanged():
    m = StepMap([0.5], [0.2, 0.8])
    same, info = reduce_map(m, 2)
    assert same is m and not info.reduced and info.max_error == 0.0
    s = SigmoidMap(-2.0, 0.5)
    assert reduce_map(s, 2)[0] is s
    big = StepMap(np.linspace(0, 1, 99), np.linspace(0, 1, 100))
    assert reduce_map(big, None)[0] is big


# ---------------------------------------------------------------------------------------------
# calibrators
def big_data(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    s = np.round(rng.beta(2, 3, n), 6)
    y = (rng.random(n) < s ** 1.6).astype(float)
    return s, y


CAPPED = [m for m in available_calibrators()
          if "max_map_size" in calibrator_class(m)._get_param_names()]


def test_every_growing_method_declares_the_cap():
    assert {"kde", "isotonic", "enir", "bbq", "histogram", "sbb", "abb"} <= set(CAPPED)


@pytest.mark.parametrize("name", available_calibrators())
def test_every_method_records_its_map_reduction(name):
    s, y = big_data(3000)
    cal = mlcal.get_calibrator(name).fit(s, y)
    info = cal.map_reduction_
    assert info.size == cal.map_.size <= DEFAULT_MAX_MAP_SIZE


@pytest.mark.filterwarnings("ignore::mlcal.calibrators.bayesian_binning.PreAggregationWarning")
@pytest.mark.parametrize("name,params", [
    ("kde", {}), ("kde", {"kernel": "gaussian"}), ("isotonic", {}),
    ("isotonic", {"interpolate": False}), ("enir", {}), ("enir", {"interpolate": False}),
    ("bbq", {}), ("histogram", {"n_bins": 500}), ("abb", {"max_unique": 300})])
@pytest.mark.usefixtures("without_output_floor")
def test_capped_fit_is_the_reduced_uncapped_fit(name, params):
    s, y = big_data()
    full = mlcal.get_calibrator(name, max_map_size=None, **params).fit(s, y)
    cap = max(2, full.map_.size // 5)
    capped = mlcal.get_calibrator(name, max_map_size=cap, **params).fit(s, y)
    info = capped.map_reduction_
    assert info.reduced and info.original_size == full.map_.size and capped.map_.size <= cap
    expected, _ = reduce_map(full.map_, cap)
    assert capped.map_ == expected              # KDE's early reduction included
    grid = probe_grid(getattr(full.map_, "thresholds", getattr(full.map_, "knots", None)), 0, 1)
    brute = float(np.abs(full.predict(grid) - capped.predict(grid)).max())
    assert brute == pytest.approx(info.max_error, rel=1e-12, abs=1e-15)
    back = type(capped).from_json(capped.to_json())
    assert back.map_ == capped.map_ and back.get_params()["max_map_size"] == cap


def test_kde_boxcar_cap_on_by_default():
    s, y = big_data(30000)
    cal = mlcal.KDECalibrator().fit(s, y)
    info = cal.map_reduction_
    assert info.reduced and info.original_size > DEFAULT_MAX_MAP_SIZE
    assert cal.map_.size <= DEFAULT_MAX_MAP_SIZE
    assert info.max_error < 0.01


def test_capped_fit_is_row_order_invariant():
    s, y = big_data(5000)
    perm = np.random.default_rng(1).permutation(s.size)
    for name in ("kde", "isotonic", "enir"):
        a = mlcal.get_calibrator(name, max_map_size=20).fit(s, y).to_json()
        b = mlcal.get_calibrator(name, max_map_size=20).fit(s[perm], y[perm]).to_json()
        assert a == b, name


@pytest.mark.parametrize("bad", [1, 0, -5, 2.5, "10", True])
def test_bad_max_map_size_is_named(bad):
    with pytest.raises(InvalidParameterError, match="max_map_size"):
        mlcal.Isotonic(max_map_size=bad).fit([0.1, 0.5, 0.9], [0, 1, 1])
