"""Nadaraya-Watson regression of labels on scores, folded into canonical maps.

* Boxcar kernel: exact, as a step function with thresholds at X_i - h and just above X_i + h.
* Gaussian kernel: evaluated with a 1-D fast Gauss transform (Taylor expansion per cell of
  width h, truncated at 10 h), then tabulated on an adaptively refined grid for a piecewise
  linear map whose error is measured.

All functions take the output of :func:`mlcal._solvers.ties.sort_and_collapse`: strictly
increasing unique scores ``x``, weighted mean labels ``ybar`` and total weights ``wsum > 0``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_exp, det_log
from mlcal._solvers.exact import ceil_div, floor_divide_exact

SILVERMAN_FACTOR = 1.06


def silverman_bandwidth(x: np.ndarray, wsum: np.ndarray) -> float:
    """Silverman's rule of thumb ``1.06 * sd * N^(-1/5)`` with frequency weights.

    ``N`` is the total weight and ``sd`` the weighted sample standard deviation with the
    ``N - 1`` denominator (ddof = 1), so integer weights equal repeated rows. Returns 0.0 when
    all scores are equal.

    Raises
    ------
    ValueError
        If the total weight is at most 1 (the ddof = 1 variance is undefined).
    """
    n = float(wsum.sum())
    if n <= 1.0:
        raise ValueError("bandwidth='silverman' needs a total sample weight above 1 (it uses the "
                         f"ddof=1 standard deviation); got {n:.6g}; pass a numeric bandwidth")
    # np.sum, not np.dot: BLAS picks a CPU-specific kernel (another summation order) for dot
    mean = float(np.sum(wsum * x)) / n
    var = float(np.sum(wsum * ((x - mean) * (x - mean)))) / (n - 1.0)
    return SILVERMAN_FACTOR * math.sqrt(max(var, 0.0)) * det_exp(-0.2 * det_log(n))   # n^(-1/5)


# ---------------------------------------------------------------------------------------------
# boxcar
@njit(cache=True, inline="always")
def _enter(x, i, h):
    return x[i] - h


@njit(cache=True, inline="always")
def _leave(x, j, h):
    return np.nextafter(x[j] + h, np.inf)


#: Window weight share of the prefix sum below which a window is summed directly.
_CANCEL_SHARE = 2.0 ** -26


@njit(cache=True)
def _boxcar_sweep(x, ybar, wsum, h, w_pre, y_pre):
    """One merge pass over the sorted enter/leave thresholds (see :func:`boxcar_step`); they
    are computed on the fly rather than stored (two arrays fewer at millions of points).

    A window's sums are differences of prefix sums, unless either is below ``_CANCEL_SHARE``
    of its prefix: there the difference has lost over 26 bits to cancellation (weights
    spanning many decades; it can even be exactly 0 and divide by zero), and the window is
    summed directly instead (also when its label sum is 0: the direct sum is then exactly 0)."""
    m = x.size
    thresholds = np.empty(3 * m)
    values = np.empty(3 * m + 1)
    values[0] = ybar[0]                 # left of every window: nearest score is x[0]
    nt = 0
    n_gaps = 0
    i = 0                               # points entered so far
    j = 0                               # points left so far
    while i < m or j < m:
        t_leave = _leave(x, j, h)
        t = _enter(x, i, h) if (i < m and _enter(x, i, h) <= t_leave) else t_leave
        while i < m and _enter(x, i, h) <= t:
            i += 1
        while j < m and _leave(x, j, h) <= t:
            j += 1
        if i > j:                       # window holds points j..i-1
            den = w_pre[i] - w_pre[j]
            num = y_pre[i] - y_pre[j]
            if den > _CANCEL_SHARE * w_pre[i] and num > _CANCEL_SHARE * y_pre[i]:
                v = num / den
            else:                       # every collapsed weight is > 0, so den > 0 here
                num = 0.0
                den = 0.0
                for k in range(j, i):
                    num += wsum[k] * ybar[k]
                    den += wsum[k]
                v = num / den
        elif i == m:                    # beyond the last window
            v = ybar[m - 1]
        else:                           # gap between x[i-1] and x[i]; next threshold enter(i)
            n_gaps += 1
            split = 0.5 * (x[i - 1] + x[i])
            if split <= t:
                v = ybar[i]
            elif split >= _enter(x, i, h):
                v = ybar[i - 1]
            else:                       # [t, split) -> x[i-1], [split, enter(i)) -> x[i]
                if ybar[i - 1] != values[nt]:
                    thresholds[nt] = t
                    values[nt + 1] = ybar[i - 1]
                    nt += 1
                t = split
                v = ybar[i]
        v = min(max(v, 0.0), 1.0)
        if v != values[nt]:             # equal neighbours merge: same function, fewer steps
            thresholds[nt] = t
            values[nt + 1] = v
            nt += 1
    return thresholds[:nt], values[:nt + 1], n_gaps


def boxcar_step(x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray,
                h: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Boxcar Nadaraya-Watson estimate as an exact step function, in one O(N) pass.

    Point i is in the window of s iff ``fl(X_i - h) <= s <= fl(X_i + h)`` (the closed window
    ``|s - X_i| <= h``, each end rounded once). Entering thresholds are ``X_i - h``; leaving
    thresholds are the next double above ``X_i + h``, so that with ``side="right"`` the step
    function equals the direct formula at *every* double, window ends included.

    Where the window is empty (more than h beyond the data, and in gaps wider than 2h) the
    estimate is the weighted mean label of the nearest training score, the larger one when two
    are equally near (a threshold at the midpoint of the gap); this is also the estimate at the
    nearest score whose window is not empty.

    Returns
    -------
    thresholds, values
        For :class:`~mlcal.maps.StepMap`; equal neighbouring values are merged.
    n_gaps
        Number of interior gaps (runs of empty windows between training scores).
    """
    w_pre = np.concatenate(([0.0], np.cumsum(wsum)))
    y_pre = np.concatenate(([0.0], np.cumsum(wsum * ybar)))
    t, v, n_gaps = _boxcar_sweep(x, ybar, wsum, float(h), w_pre, y_pre)
    return t, v, int(n_gaps)


# ---------------------------------------------------------------------------------------------
# Gaussian: fast Gauss transform
N_TERMS = 32          # Taylor terms of exp(t s), |s| <= 1/2, |t| <= 10.5: truncation < 1e-8 rel.
CUTOFF = 10.0         # cells farther than 10 h (+ half a cell) are ignored: weight < e^-50
FALLBACK_RATIO = 1e-12  # below this share of the total weight the query is evaluated directly


@njit(cache=True)
def _fgt_moments(x, wy, w, h):
    """Cell moments: cells of width h from x[0]; A[c, k] = sum w e^{-s^2/2} s^k / k!."""
    m = x.size
    cell = np.empty(m, dtype=np.int64)
    for i in range(m):
        cell[i] = int(floor_divide_exact(x[i] - x[0], h))
    n_cells = 1
    for i in range(1, m):
        if cell[i] != cell[i - 1]:
            n_cells += 1
    ids = np.empty(n_cells, dtype=np.int64)
    centre = np.empty(n_cells)
    a_w = np.zeros((n_cells, N_TERMS))
    a_y = np.zeros((n_cells, N_TERMS))
    c = -1
    for i in range(m):
        if i == 0 or cell[i] != cell[i - 1]:
            c += 1
            ids[c] = cell[i]
            centre[c] = x[0] + (cell[i] + 0.5) * h
        s = (x[i] - centre[c]) / h
        g = det_exp(-0.5 * s * s)
        term_w = w[i] * g
        term_y = wy[i] * g
        for k in range(N_TERMS):
            a_w[c, k] += term_w
            a_y[c, k] += term_y
            term_w *= s / (k + 1)
            term_y *= s / (k + 1)
    return ids, centre, a_w, a_y


@njit(cache=True)
def _direct_query(q, x, wy, w, h):
    """Stable direct Gaussian NW at q: weights relative to the nearest point, window where the
    relative weight exceeds e^-50."""
    m = x.size
    j = np.searchsorted(x, q)
    d_min = np.inf
    if j < m:
        d_min = x[j] - q
    if j > 0:
        d_min = min(d_min, q - x[j - 1])
    radius = math.sqrt(d_min * d_min + 100.0 * h * h)
    lo = np.searchsorted(x, q - radius)
    hi = np.searchsorted(x, q + radius, side="right")
    num = 0.0
    den = 0.0
    inv = 0.5 / (h * h)
    base = d_min * d_min * inv
    for i in range(lo, hi):
        d = q - x[i]
        g = det_exp(base - d * d * inv)
        num += wy[i] * g
        den += w[i] * g
    return num / den


@njit(cache=True)
def _fgt_eval(queries, x, wy, w, h, ids, centre, a_w, a_y):
    total = 0.0
    for i in range(w.size):
        total += w[i]
    out = np.empty(queries.size)
    reach = int(math.ceil(CUTOFF)) + 1
    for qi in range(queries.size):
        q = queries[qi]
        qc = int(floor_divide_exact(q - x[0], h))
        c0 = np.searchsorted(ids, qc - reach)
        c1 = np.searchsorted(ids, qc + reach, side="right")
        num = 0.0
        den = 0.0
        for c in range(c0, c1):
            t = (q - centre[c]) / h
            if abs(t) > CUTOFF + 0.5:
                continue
            pw = 0.0
            py = 0.0
            for k in range(N_TERMS - 1, -1, -1):     # Horner in t
                pw = pw * t + a_w[c, k]
                py = py * t + a_y[c, k]
            g = det_exp(-0.5 * t * t)
            num += g * py
            den += g * pw
        if den > FALLBACK_RATIO * total:
            out[qi] = num / den
        else:                                         # far from all data: no truncation
            out[qi] = _direct_query(q, x, wy, w, h)
    return out


class GaussianNW:
    """Gaussian-kernel Nadaraya-Watson estimate ``sum w y K / sum w K``, K(u) = exp(-u^2/2).

    Evaluation costs O(N * 32) once for the cell moments and about 21 * 32 operations per
    query. Relative error versus the exact sum is below about 1e-8 (Taylor truncation, worst
    at the edge of the 10 h cut-off) and far smaller near the data.
    """

    def __init__(self, x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray, h: float):
        self.x = np.ascontiguousarray(x, dtype=np.float64)
        self.wy = np.ascontiguousarray(wsum * ybar, dtype=np.float64)
        self.w = np.ascontiguousarray(wsum, dtype=np.float64)
        self.h = float(h)
        self._cells = _fgt_moments(self.x, self.wy, self.w, self.h)

    def __call__(self, queries: np.ndarray) -> np.ndarray:
        q = np.ascontiguousarray(queries, dtype=np.float64).reshape(-1)
        return np.clip(_fgt_eval(q, self.x, self.wy, self.w, self.h, *self._cells), 0.0, 1.0)


CHECK_FRACTIONS = np.array([0.25, 0.5, 0.75])


def gaussian_grid(nw: GaussianNW, lo: float, hi: float, tol: float,
                  max_knots: int = 2_000_000) -> tuple[np.ndarray, np.ndarray, float]:
    """Tabulate ``nw`` on [lo, hi] for linear interpolation with error at most ``tol``.

    Start from a uniform grid with spacing h/4; every interval is checked at 1/4, 1/2 and 3/4
    of its width against ``nw``; intervals whose interpolation error exceeds ``tol/2`` are split
    at the three check points (their values are already known) and checked again, until all
    pass. The error is therefore *measured* at three interior points of every final interval,
    not bounded analytically.

    Returns
    -------
    knots, values, max_error
        ``max_error`` is the largest interpolation error seen at the check points of the final
        intervals.
    """
    width = hi - lo
    n0 = int(min(max(2, ceil_div(width, nw.h / 4.0) + 1), 1 << 18))
    knots = np.linspace(lo, hi, n0)
    vals = nw(knots)
    active = np.arange(n0 - 1)
    max_err = 0.0
    min_width = 1e-9 * nw.h
    while active.size:
        left, right = knots[active], knots[active + 1]
        q = left[:, None] + CHECK_FRACTIONS[None, :] * (right - left)[:, None]
        exact = nw(q.ravel()).reshape(q.shape)
        lin = vals[active, None] + CHECK_FRACTIONS[None, :] * (vals[active + 1]
                                                               - vals[active])[:, None]
        err = np.abs(exact - lin).max(axis=1)
        bad = (err > 0.5 * tol) & (right - left > min_width)
        if (~bad).any():
            max_err = max(max_err, float(err[~bad].max()))
        if not bad.any() or knots.size + 3 * int(bad.sum()) > max_knots:
            if bad.any():
                max_err = max(max_err, float(err[bad].max()))
            break
        new_x = q[bad].ravel()
        new_v = exact[bad].ravel()
        all_x = np.concatenate((knots, new_x))
        order = np.argsort(all_x, kind="stable")
        knots = all_x[order]
        vals = np.concatenate((vals, new_v))[order]
        # each split interval becomes four; find them by their left ends
        starts = np.concatenate((left[bad, None], q[bad]), axis=1).ravel()
        active = np.searchsorted(knots, starts)
    return knots, vals, max_err
