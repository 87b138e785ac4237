"""The banded smooth ECE (mlcal._solvers.smooth_kernel) against the dense kernel sums it
replaced (copied here as the brute-force reference) and against the paper's definition."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from mlcal import metrics
from mlcal.metrics.binary import _AGGREGATE_ABOVE

_SQRT_2PI = np.sqrt(2.0 * np.pi)


# --- the dense implementation before the banded one (mlcal da83df4), verbatim -----------------
def _ref_smooth_residual(p, r, sigma, grid, mass, chunk=4096):
    num = np.zeros(grid.size)
    den = np.zeros(grid.size)
    for start in range(0, p.size, chunk):
        pc, rc, mc = p[start:start + chunk], r[start:start + chunk], mass[start:start + chunk]
        k = np.zeros((grid.size, pc.size))
        for centre in (pc, -pc, 2.0 - pc):
            d = (grid[:, None] - centre[None, :]) / sigma
            k += np.exp(-0.5 * d * d)
        k /= sigma * _SQRT_2PI
        num += k @ rc
        den += k @ mc
    total = float(mass.sum())
    return num / total, den / total


def _ref_grid_for(sigma):
    return np.linspace(0.0, 1.0, int(min(20001, max(1001, np.ceil(10.0 / sigma)) + 1)))


def _ref_aggregate(p, r):
    if p.size <= 2001:
        return p, r, np.ones(p.size)
    m = 2000
    pos = p * m
    left = np.minimum(pos.astype(np.int64), m - 1)
    frac = pos - left
    mass = np.bincount(left, 1.0 - frac, m + 1) + np.bincount(left + 1, frac, m + 1)
    res = np.bincount(left, (1.0 - frac) * r, m + 1) + np.bincount(left + 1, frac * r, m + 1)
    return np.linspace(0.0, 1.0, m + 1), res, mass


def ref_smooth_ece_at(y, p, sigma):
    pts, res, mass = _ref_aggregate(p, p - y)
    grid = _ref_grid_for(sigma)
    num, den = _ref_smooth_residual(pts, res, float(sigma), grid, mass)
    return float(np.trapezoid(np.abs(num), grid) / np.trapezoid(den, grid))


def ref_smooth_ece(y, p, tol=1e-4):
    lo, hi = 0.0, 1.0
    if ref_smooth_ece_at(y, p, hi) >= hi:
        return ref_smooth_ece_at(y, p, hi), hi
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if ref_smooth_ece_at(y, p, mid) > mid:
            lo = mid
        else:
            hi = mid
    return ref_smooth_ece_at(y, p, hi), hi
# -----------------------------------------------------------------------------------------------


def _sample(n, seed, kind):
    rng = np.random.default_rng(seed)
    if kind == "calibrated":
        p = rng.uniform(size=n)
        y = (rng.uniform(size=n) < p).astype(float)
    elif kind == "overconfident":
        q = rng.uniform(size=n)
        y = (rng.uniform(size=n) < q).astype(float)
        p = np.clip(0.5 + 1.8 * (q - 0.5), 0.0, 1.0)
    elif kind == "extreme":         # exact 0s and 1s, values within 1e-12 of the ends
        p = rng.choice([0.0, 1.0, 1e-12, 1.0 - 1e-12, 1e-300, 0.5], size=n)
        p[: n // 3] = rng.uniform(size=n // 3) ** 8
        y = (rng.uniform(size=n) < 0.5).astype(float)
    elif kind == "ties":            # few distinct scores
        p = rng.choice(np.linspace(0.05, 0.95, 7), size=n)
        y = (rng.uniform(size=n) < p ** 1.5).astype(float)
    elif kind == "bad":             # far off: a large sigma*
        p = rng.uniform(0.0, 0.2, size=n)
        y = (rng.uniform(size=n) < 0.9).astype(float)
    else:
        raise ValueError(kind)
    return y, p


# every kind at small N; around the aggregation threshold (2001) and above it, one kind each
# (the dense reference costs seconds there). A one-off run of all five kinds at N = 1, 2, 3, 7,
# 60, 500, 2000, 2001, 2002, 5000, 30000 plus 15 bandwidths from 1 to 6.1e-5 at each N (220
# cases) found the same sigma* everywhere and |diff| <= 7.6e-14 x max(value, 1e-3).
CASES = ([(n, kind) for n in (1, 2, 7, 60) for kind in ("calibrated", "overconfident",
                                                         "extreme", "ties", "bad")]
         + [(_AGGREGATE_ABOVE - 1, "extreme"), (_AGGREGATE_ABOVE, "ties"),
            (_AGGREGATE_ABOVE + 1, "bad")])


@pytest.mark.parametrize("n,kind", CASES)
def test_smooth_ece_equals_the_dense_reference(n, kind):
    y, p = _sample(n, n * 7 + len(kind), kind)
    # at the aggregation threshold a coarser tolerance keeps the dense reference to seconds
    # (the bandwidths below 1e-3 are compared value by value in the next test)
    tol = 1e-4 if n < 1000 else 1e-3
    value, sigma = metrics.smooth_ece(y, p, return_bandwidth=True, tol=tol)
    ref_value, ref_sigma = ref_smooth_ece(y, p, tol)
    assert sigma == ref_sigma                     # the same bisection path
    assert value == pytest.approx(ref_value, rel=1e-12, abs=1e-13)


@pytest.mark.parametrize("n,sigmas", [
    (3, [1.0, 0.3, 0.04, 0.01, 0.0099, 0.001, 4e-4, 1e-4, 6.1e-5]),
    (300, [0.7, 0.1, 0.0101, 0.006, 4e-4, 6.1e-5]),
    # aggregated: the lattice path (1001-point grid) for sigma >= 0.01, banded below
    (20000, [1.0, 0.3, 0.04, 0.01, 0.0099, 0.005, 0.002]),     # aggregated
])
def test_smooth_ece_at_equals_the_dense_reference_over_bandwidths(n, sigmas):
    y, p = _sample(n, 11 + n, "overconfident")
    for sigma in sigmas:
        got = metrics.smooth_ece_at(y, p, sigma)
        assert got == pytest.approx(ref_smooth_ece_at(y, p, sigma), rel=1e-12, abs=1e-14), sigma


def test_smooth_ece_at_follows_the_papers_definition():
    # Błasiok & Nakkiran: the residuals smoothed by the reflected Gaussian kernel, integrated
    # over [0, 1] and normalised by the smoothed density's integral (adaptive quadrature)
    # (the trapezoid rule on |num| errs by O(h^2) where num changes sign)
    y, p = _sample(20, 3, "overconfident")
    p[:3] = [0.0, 1.0, 1e-9]
    for sigma in (0.02, 0.15):
        def kern(t):
            return sum(norm.pdf(t, c, sigma) for c in (p, -p, 2 - p))

        pts = np.sort(np.concatenate((p, [0.0, 1.0])))
        num = integrate.quad(lambda t: abs(np.sum(kern(t) * (p - y))) / p.size, 0, 1,
                             points=pts[1:-1], limit=2000, epsabs=1e-13)[0]
        den = integrate.quad(lambda t: kern(t).sum() / p.size, 0, 1, points=pts[1:-1],
                             limit=2000, epsabs=1e-13)[0]
        assert metrics.smooth_ece_at(y, p, sigma) == pytest.approx(num / den, rel=1e-5)


def test_smooth_ece_is_the_fixed_point_and_repeatable():
    y, p = _sample(30000, 5, "overconfident")
    value, sigma = metrics.smooth_ece(y, p, return_bandwidth=True)
    assert metrics.smooth_ece_at(y, p, sigma) == value
    assert metrics.smooth_ece_at(y, p, sigma - 1e-4) > sigma - 1e-4 >= value - 1e-4
    assert metrics.smooth_ece(y, p[::-1].copy()[::-1]) == value
