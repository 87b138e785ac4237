"""Banded sums of a reflected Gaussian kernel for the smooth ECE (Błasiok & Nakkiran 2023).

smECE_sigma = trapz |sum_i K(t, p_i) r_i| / trapz sum_i m_i K(t, p_i) over a uniform grid t on
[0, 1], with K the Gaussian of width sigma reflected at 0 and 1 (images at p, -p and 2 - p).
The dense sum costs grid x points x 3 exponentials; here:

* the points and their two mirror images form one sorted list of centres in [-1, 2], and each
  grid point only sums the centres within ``CUTOFF * sigma`` of it (two pointers moving right):
  beyond, the kernel is below 1e-17 of its peak (exp(-CUTOFF^2 / 2) < 1e-17), so every dropped
  term is below 1e-17 of the largest one and the value moves by far less than 1e-12. The cost
  is grid x (points within the band) instead of grid x points x 3: at most ~10 / sigma grid
  points times ~18 sigma x 2001 aggregated points, about 3.6e5 kernel values, for sigma < 0.01.

Exponentials are :func:`mlcal._solvers.detmath.det_exp` and the sums run in a fixed order in
compiled loops (no BLAS, no SIMD dispatch, no fast-math), so the value has the same bits on
every x86-64 CPU. The constant factor 1 / (sigma sqrt(2 pi) N) of both sums cancels in the ratio
and is not applied.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_exp

#: kernel truncation radius in bandwidths: exp(-CUTOFF^2 / 2) = 1e-17 (relative to the peak)
CUTOFF = math.sqrt(2.0 * 17.0 * math.log(10.0))
#: steps of the kernel recurrence between two exact (det_exp) evaluations
ANCHOR = 64


@njit(cache=True, nogil=True)
def _trapezoid_ratio(grid, num, den):
    """trapz(|num|, grid) / trapz(den, grid), summed left to right."""
    a = 0.0
    b = 0.0
    for i in range(grid.shape[0] - 1):
        h = grid[i + 1] - grid[i]
        a += h * (abs(num[i]) + abs(num[i + 1])) / 2.0
        b += h * (den[i] + den[i + 1]) / 2.0
    return a / b


@njit(cache=True, nogil=True)
def _walk(num, den, c, r, w, start, stop, step, h, sigma, delta, q):
    """Add K(t_i, c) r and K(t_i, c) w to num[i], den[i] for i = start, start + step, ...
    (excluding ``stop``), moving away from the centre ``c``: with d_i = (i h - c) / sigma,
    K_{i+1} = K_i exp(-d_i delta - delta^2 / 2) and that factor shrinks by q = exp(-delta^2)
    each step (mirrored for step = -1). Both are recomputed with det_exp every ``ANCHOR``
    steps, so the rounding error stays below ~2 * ANCHOR ulp of each kernel value."""
    i = start
    n = 0
    k = 0.0
    f = 0.0
    while i != stop:
        if n % ANCHOR == 0:
            d = (i * h - c) / sigma
            k = det_exp(-0.5 * d * d)
            f = det_exp(-step * d * delta - 0.5 * delta * delta)
        num[i] += k * r
        den[i] += k * w
        k *= f
        f *= q
        i += step
        n += 1


@njit(cache=True, nogil=True)
def _banded_ratio(centres, res, mass, sigma, grid, cut):
    """Scattered centres (points and mirror images) with their residuals and masses; each adds
    its kernel to the grid points within ``cut`` of it, walking out from the nearest one."""
    g = grid.shape[0]
    h = 1.0 / (g - 1)
    delta = h / sigma
    q = det_exp(-delta * delta)
    num = np.zeros(g)
    den = np.zeros(g)
    for j in range(centres.shape[0]):
        c = centres[j]
        lo = max(int(math.ceil((c - cut) / h)), 0)
        hi = min(int(math.floor((c + cut) / h)), g - 1)
        if lo > hi:
            continue
        mid = min(max(int(math.floor(c / h + 0.5)), lo), hi)
        _walk(num, den, c, res[j], mass[j], mid, hi + 1, 1, h, sigma, delta, q)
        _walk(num, den, c, res[j], mass[j], mid - 1, lo - 1, -1, h, sigma, delta, q)
    return _trapezoid_ratio(grid, num, den)


def smooth_ratio(points: np.ndarray, res: np.ndarray, mass: np.ndarray, sigma: float,
                 grid: np.ndarray) -> float:
    """trapz |sum K r| / trapz sum K m on ``grid`` (increasing, from 0 to 1) for ``points`` in
    [0, 1] (any order) with residuals ``res`` and masses ``mass``."""
    order = np.argsort(points, kind="stable")
    p, r, w = points[order], res[order], mass[order]
    centres = np.concatenate((-p[::-1], p, 2.0 - p[::-1]))
    return float(_banded_ratio(centres, np.concatenate((r[::-1], r, r[::-1])),
                               np.concatenate((w[::-1], w, w[::-1])), float(sigma), grid,
                               CUTOFF * sigma))
