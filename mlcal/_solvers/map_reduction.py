"""Shrinking a step or piecewise-linear map to at most K pieces with a small sup-norm error.

Both reductions keep a *subset* of the original cut points (thresholds or knots), which is what
makes their error exactly measurable:

* Step map: consecutive bins are merged into runs whose values span at most ``r``; a run takes
  the midpoint of its smallest and largest value, so every original bin moves by at most
  ``r / 2``. The greedy left-to-right grouping is optimal for a given ``r`` (a run can always
  be extended while its span stays within ``r``), so bisection on ``r`` finds the smallest
  sup-norm error any K-bin step map with cuts at original thresholds can reach, within a
  relative 2^-12.
* Linear map: interior knots are dropped, keeping the original values at the kept knots. A
  greedy pass grows each segment from its anchor knot while the slope to the candidate end
  knot stays inside the cone of slopes that pass within ``r`` of every skipped knot, and ends it
  at the last knot that fitted. Bisection on ``r`` finds a small ``r`` with at most K knots.
  Kept values are original values, so a monotone map stays monotone.

Between two consecutive *original* cut points both the original and the reduced map are
constant (step) or linear (linear), and beyond the outer cut points both are constant with the
same value, so ``|original - reduced|`` attains its supremum at an original bin or knot. The
measured error returned here is that maximum, taken over every original bin or knot: it is the
exact sup-norm distance between the two maps (up to the rounding of evaluating them).

Only IEEE comparisons, additions, subtractions, multiplications and divisions are used, so the
result is the same on every CPU.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: bisection on the tolerance stops when the bracket is this narrow relative to its upper end
RELATIVE_BRACKET = 2.0 ** -12
MAX_BISECTIONS = 200


# ---------------------------------------------------------------------------------------------
# step maps
@njit(cache=True, nogil=True)
def _step_runs(values, r, limit):
    """Number of greedy runs with span <= r (counting stops once it exceeds ``limit``)."""
    runs = 1
    lo = values[0]
    hi = values[0]
    for i in range(1, values.size):
        v = values[i]
        new_lo = min(lo, v)
        new_hi = max(hi, v)
        if new_hi - new_lo <= r:
            lo = new_lo
            hi = new_hi
        else:
            runs += 1
            if runs > limit:
                return runs
            lo = v
            hi = v
    return runs


@njit(cache=True, nogil=True)
def _step_merge(thresholds, values, r):
    """The greedy runs of span <= r as (thresholds, midpoint values, max |change|)."""
    n = values.size
    out_t = np.empty(n - 1)
    out_v = np.empty(n)
    starts = np.empty(n + 1, dtype=np.int64)
    k = 0
    starts[0] = 0
    lo = values[0]
    hi = values[0]
    for i in range(1, n):
        v = values[i]
        new_lo = min(lo, v)
        new_hi = max(hi, v)
        if new_hi - new_lo <= r:
            lo = new_lo
            hi = new_hi
        else:
            out_v[k] = min(max(lo + 0.5 * (hi - lo), lo), hi)   # no overflow, never outside
            out_t[k] = thresholds[i - 1]
            k += 1
            starts[k] = i
            lo = v
            hi = v
    out_v[k] = min(max(lo + 0.5 * (hi - lo), lo), hi)
    starts[k + 1] = n
    err = 0.0
    for run in range(k + 1):
        for i in range(starts[run], starts[run + 1]):
            err = max(err, abs(values[i] - out_v[run]))
    return out_t[:k].copy(), out_v[:k + 1].copy(), err


def _smallest_feasible(count, hi: float, max_size: int) -> float:
    """Bisection for a small ``r`` with ``count(r) <= max_size``; ``count(hi)`` must satisfy it."""
    lo = 0.0
    for _ in range(MAX_BISECTIONS):
        if hi - lo <= RELATIVE_BRACKET * hi:
            break
        mid = lo + 0.5 * (hi - lo)
        if count(mid) <= max_size:
            hi = mid
        else:
            lo = mid
    return hi


def reduce_step(thresholds: np.ndarray, values: np.ndarray,
                max_size: int) -> tuple[np.ndarray, np.ndarray, float]:
    """At most ``max_size`` bins approximating a step map with the smallest sup error (see the
    module docstring).

    Parameters
    ----------
    thresholds : array of shape (K-1,)
        Strictly increasing cuts (``searchsorted(..., side="right")`` convention).
    values : array of shape (K,)
        Bin values.
    max_size : int
        Largest number of bins wanted (>= 1).

    Returns
    -------
    thresholds, values, max_error
        A subset of the cuts, the merged values (midpoints of each run's range, so they stay in
        the range of the original values) and the measured ``max |original - reduced|`` over
        every original bin, which is the exact sup-norm distance of the two maps.
    """
    t = np.ascontiguousarray(thresholds, dtype=np.float64)
    v = np.ascontiguousarray(values, dtype=np.float64)
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, got {max_size}")
    if v.size <= max_size:
        return t, v, 0.0
    r = _smallest_feasible(lambda r: _step_runs(v, r, max_size), float(v.max() - v.min()),
                           max_size)
    return _step_merge(t, v, r)


# ---------------------------------------------------------------------------------------------
# linear maps
@njit(cache=True, nogil=True)
def _linear_keep(x, v, r, limit):
    """Greedy knot subset within ``r`` of every skipped knot (indices, or ``limit + 1`` of them
    once more than ``limit`` are needed)."""
    n = x.size
    keep = np.empty(n, dtype=np.int64)
    keep[0] = 0
    k = 1
    a = 0
    while a < n - 1:
        lo = -np.inf
        hi = np.inf
        best = a + 1
        j = a + 1
        while j < n:
            dx = x[j] - x[a]
            slope = (v[j] - v[a]) / dx
            if lo <= slope <= hi:
                best = j
            # cone of slopes from the anchor that pass within r of knot j
            lo = max(lo, (v[j] - r - v[a]) / dx)
            hi = min(hi, (v[j] + r - v[a]) / dx)
            if lo > hi:
                break
            j += 1
        keep[k] = best
        k += 1
        if k > limit:
            break
        a = best
    return keep[:k].copy()


@njit(cache=True, nogil=True)
def _interp_error(x, v, keep):
    """max |original - reduced| over the original knots; the reduced map interpolates linearly
    between kept knots exactly as ``np.interp`` does (``v0 + slope * (s - x0)``)."""
    err = 0.0
    for seg in range(keep.size - 1):
        i0 = keep[seg]
        i1 = keep[seg + 1]
        slope = (v[i1] - v[i0]) / (x[i1] - x[i0])
        for i in range(i0 + 1, i1):
            err = max(err, abs(v[i] - (v[i0] + slope * (x[i] - x[i0]))))
    return err


def reduce_linear(knots: np.ndarray, values: np.ndarray,
                  max_size: int) -> tuple[np.ndarray, np.ndarray, float]:
    """At most ``max_size`` knots (a subset, with their original values) approximating a
    piecewise-linear map with a small sup error (see the module docstring).

    Parameters
    ----------
    knots, values : arrays of shape (K,)
        Strictly increasing knots and the map's values there.
    max_size : int
        Largest number of knots wanted (>= 2).

    Returns
    -------
    knots, values, max_error
        The kept knots and values (first and last always kept) and the measured
        ``max |original - reduced|`` over every original knot, which is the sup-norm distance of
        the two maps.
    """
    x = np.ascontiguousarray(knots, dtype=np.float64)
    v = np.ascontiguousarray(values, dtype=np.float64)
    if max_size < 2:
        raise ValueError(f"max_size must be at least 2 for a linear map, got {max_size}")
    if x.size <= max_size:
        return x, v, 0.0

    def count(r: float) -> int:
        return int(_linear_keep(x, v, r, max_size).size)

    # the chord from the first to the last knot is within max - min of every value
    hi = float(v.max() - v.min())
    while count(hi) > max_size:     # only rounding can make the chord miss: widen
        hi = 2.0 * hi if hi > 0.0 else 1e-300
    keep = _linear_keep(x, v, _smallest_feasible(count, hi, max_size), max_size)
    return x[keep], v[keep], float(_interp_error(x, v, keep))
