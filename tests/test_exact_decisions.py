"""Integer decisions (bin counts, bin ranges, grid cells) are exact and CPU-independent.

References are brute force over integers and exact rationals, never a float root: numpy's
``cbrt`` is not correctly rounded on every CPU (``cbrt(27000.)`` is 29.999999999999996 on some),
which once made the bin counts, and the suite, depend on the machine.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import mlcal
from mlcal._solvers import exact
from mlcal._solvers.bbq_models import bbq_bin_range, nominal_block_sizes
from mlcal._solvers.binning import equal_frequency_bins
from mlcal._solvers.neariso import path_breakpoints
from mlcal._solvers.trend_filter import thin
from mlcal.calibrators.histogram import HistogramBinning


def brute_floor_cbrt(q: Fraction) -> int:
    """Largest k with k^3 <= q by bisection over integers with exact comparisons."""
    lo, hi = 0, 1
    while hi ** 3 <= q:
        hi *= 2
    while hi - lo > 1:                         # invariant: lo^3 <= q < hi^3
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if mid ** 3 <= q else (lo, mid)
    return lo


def brute_ceil_cbrt(q: Fraction) -> int:
    k = brute_floor_cbrt(q)
    return k if k ** 3 == q else k + 1


def brute_round_cbrt(q: Fraction) -> int:
    """Nearest integer to cbrt(q), halves up: compare q with the exact cubes of k +- 1/2."""
    k = brute_floor_cbrt(q)
    return k + 1 if Fraction(2 * k + 1, 2) ** 3 <= q else k


def boundary_values() -> list[float]:
    """Perfect cubes (and 1000 * cubes, BBQ's B_min edges) with their integer and float
    neighbours, fractional totals just below and above, and a few ordinary values."""
    out: list[float] = []
    for c in (2, 10, 20, 30, 100, 1000, 12345):
        for v in (float(c ** 3), float(1000 * c ** 3)):
            out += [v - 1, v, v + 1, math.nextafter(v, 0.0), math.nextafter(v, math.inf),
                    v - 0.5, v + 0.5]
    # halves of the rounding rule: (k + 1/2)^3 exactly representable
    for k in (1, 3, 29, 99):
        h = float(Fraction(2 * k + 1, 2) ** 3)
        out += [h, math.nextafter(h, 0.0), math.nextafter(h, math.inf)]
    out += [0.0, 0.3, 1.0, 5.0, 6.0, 7.9999999, 1e6 + 0.25, 2.0 ** 53, 1e300]
    return out


@pytest.mark.parametrize("v", boundary_values())
def test_cbrt_integers_equal_brute_force(v):
    q = Fraction(v)
    assert exact.floor_cbrt_scaled(v) == brute_floor_cbrt(q)
    assert exact.ceil_cbrt_scaled(v) == brute_ceil_cbrt(q)
    assert exact.round_cbrt(v) == brute_round_cbrt(q)
    assert exact.floor_cbrt_scaled(v, Fraction(1, 10)) == brute_floor_cbrt(q / 1000)
    assert exact.ceil_cbrt_scaled(v, 10) == brute_ceil_cbrt(q * 1000)


def test_known_roots_at_perfect_cubes():
    assert [exact.round_cbrt(float(n)) for n in (8, 27000, 10 ** 6, 10 ** 9)] == [2, 30, 100, 1000]
    assert exact.floor_cbrt_scaled(math.nextafter(27000.0, 0.0)) == 29
    assert exact.ceil_cbrt_scaled(math.nextafter(27000.0, math.inf)) == 31
    assert exact.round_cbrt(3.375) == 2                # 1.5^3: a half rounds up
    assert exact.round_cbrt(math.nextafter(3.375, 0.0)) == 1


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 63, 64, 65, 10 ** 9 - 1, 10 ** 9, 10 ** 9 + 1,
                               (10 ** 20) ** 3 - 1, (10 ** 20) ** 3, 3 ** 200])
def test_icbrt(n):
    k = exact.icbrt(n)
    assert k ** 3 <= n < (k + 1) ** 3


@pytest.mark.parametrize("v", boundary_values())
def test_bbq_bin_range_equals_exact_formula(v):
    q = Fraction(v)
    b_min = max(1, brute_floor_cbrt(q / 1000))
    b_max = max(b_min, min(math.ceil(q / 5), brute_ceil_cbrt(1000 * q)))
    assert bbq_bin_range(v) == (b_min, b_max)


def test_bbq_bin_range_at_the_cubes_that_broke_ci():
    assert bbq_bin_range(8000) == (2, 200)
    assert bbq_bin_range(27000) == (3, 300)
    assert bbq_bin_range(10 ** 6) == (10, 1000)
    assert bbq_bin_range(10 ** 9) == (100, 10000)
    assert bbq_bin_range(math.nextafter(27000.0, 0.0)) == (2, 300)


@pytest.mark.parametrize("v", boundary_values()[:-1])
def test_histogram_default_bins_equal_exact_rounding(v):
    assert HistogramBinning()._resolve_n_bins(v) == max(1, brute_round_cbrt(Fraction(v)))


def test_nominal_block_sizes():
    assert nominal_block_sizes(27000.0, True, np.array([7, 30, 300])).tolist() == [3857, 900, 90]
    frac = nominal_block_sizes(2.9999999999999996, False, np.array([3]))
    assert frac[0] == 2.9999999999999996 / 3


def test_equal_frequency_bins_integer_path_equals_exact_fractions():
    rng = np.random.default_rng(0)
    for _ in range(50):
        w = rng.integers(1, 5, size=rng.integers(5, 60)).astype(float)
        b = min(int(rng.integers(1, 12)), w.size)    # never more bins than points
        cum = np.cumsum(w)
        ref = [math.floor(Fraction(int(c) * 2 - int(wi), 2) * b / int(cum[-1]))
               for c, wi in zip(cum, w)]
        ref = np.minimum(ref, b - 1)
        ref = np.concatenate(([0], np.cumsum(ref[1:] != ref[:-1])))
        assert np.array_equal(equal_frequency_bins(w, b), ref)


def test_floor_divide_exact_matches_fractions():
    rng = np.random.default_rng(1)
    a = np.concatenate((rng.uniform(-2, 2, 2000), [0.3, 0.7, 1.0, -0.3, 1e-5 * 3]))
    for b in (0.1, 1e-5, 0.3, 7.0, -0.1):
        got = exact.floor_divide_exact_array(a, b)
        ref = [math.floor(Fraction(float(x)) / Fraction(b)) for x in a]
        assert got.tolist() == ref
    # the rounded quotient 0.3 / 0.1 = 2.9999999999999996 floors to 2, and so does the exact one
    assert exact.floor_divide_exact(0.3, 0.1) == math.floor(Fraction(0.3) / Fraction(0.1))


def test_round_half_even_ratio():
    n = np.arange(0, 200, dtype=np.int64)
    for d in (1, 2, 3, 4, 7, 10):
        ref = [round(Fraction(int(v), d)) for v in n]     # Fraction rounds halves to even
        assert exact.round_half_even_ratio(n, d).tolist() == ref


def test_path_breakpoints_exact_indices():
    lam = np.arange(1, 100, dtype=float)                  # 99 distinct merge lambdas
    out = path_breakpoints(lam, 9)
    idx = [round(Fraction(i * 99, 8)) for i in range(9)]
    assert out.tolist() == np.concatenate(([0.0], lam))[idx].tolist()


def test_thinning_cells_are_exact_floors():
    x = np.array([0.29999999999999999, 0.3, 0.30000000000000004, 0.7, 1.0])
    tol = 0.1
    cells = exact.floor_divide_exact_array(x, tol)
    assert cells.tolist() == [math.floor(Fraction(float(v)) / Fraction(tol)) for v in x]
    xt, _, wt = thin(x, np.zeros(5), np.ones(5), tol)
    assert wt.sum() == 5.0 and xt.size == np.unique(cells).size


# -- the class of bug, caught on every machine: a float root one ulp off must change nothing ----

def _off_by_ulps(fn, ulps):
    def wrapped(x, *args, **kwargs):
        r = np.asarray(fn(x, *args, **kwargs), dtype=np.float64)
        for _ in range(abs(ulps)):
            r = np.nextafter(r, np.inf if ulps > 0 else -np.inf)
        return r if r.ndim else float(r)
    return wrapped


def _every_integer_decision(values):
    return ([bbq_bin_range(v) for v in values], [HistogramBinning()._resolve_n_bins(v)
                                                 for v in values])


@pytest.mark.parametrize("ulps", [-1, 1, -3, 3])
def test_bin_counts_unchanged_when_float_roots_are_off_by_ulps(monkeypatch, ulps):
    values = [v for v in boundary_values() if v < 1e300]
    before = _every_integer_decision(values)
    monkeypatch.setattr(np, "cbrt", _off_by_ulps(np.cbrt, ulps))
    monkeypatch.setattr(np, "power", _off_by_ulps(np.power, ulps))
    monkeypatch.setattr(math, "pow", _off_by_ulps(math.pow, ulps))
    if hasattr(math, "cbrt"):
        monkeypatch.setattr(math, "cbrt", _off_by_ulps(math.cbrt, ulps))
    assert _every_integer_decision(values) == before


@pytest.mark.parametrize("method", ["histogram", "bbq"])
@pytest.mark.parametrize("ulps", [-1, 1])
def test_fit_json_unchanged_when_cbrt_is_off_by_one_ulp(monkeypatch, method, ulps):
    # N = 27000: the perfect cube whose float root rounds low on some CPUs
    rng = np.random.default_rng(3)
    s = rng.random(27000)
    y = (rng.random(27000) < s).astype(int)
    before = mlcal.get_calibrator(method).fit(s, y).to_json()
    monkeypatch.setattr(np, "cbrt", _off_by_ulps(np.cbrt, ulps))
    assert mlcal.get_calibrator(method).fit(s, y).to_json() == before
