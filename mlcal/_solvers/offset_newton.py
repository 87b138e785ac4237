"""Maximum-likelihood logit offset: the 1-D convex problem behind :func:`mlcal.maps.reoffset.fit_delta`.

Maximise ``L(d) = sum w [y log expit(l + d) + (1 - y) log(1 - expit(l + d))]`` over ``d``, for
fixed log-odds ``l``. The score ``g(d) = sum w (y - expit(l + d))`` is strictly decreasing, so the
optimum is its unique root. The root is bracketed first (doubling steps from 0), then safeguarded
Newton steps (``d - g / g'``, ``g' = -sum w p (1 - p)``) that fall outside the bracket are replaced
by bisection; every evaluation shrinks the bracket. Stopping rule: ``g(d) == 0``, or the Newton
step is below ``2^-50 * max(1, |d|)``, or the bracket has no double strictly inside it. Every
operation is a sequential IEEE one or mlcal's deterministic expit, so the result has the same bits
on every CPU.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_expit

_MAX_ITER = 400


@njit(cache=True, nogil=True)
def _score(l, y, w, d):
    g = 0.0
    h = 0.0
    for i in range(l.shape[0]):
        p = det_expit(l[i] + d)
        g += w[i] * (y[i] - p)
        h += w[i] * (p * (1.0 - p))
    return g, h


@njit(cache=True, nogil=True)
def solve_offset(l: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, int, bool]:
    """``(delta, iterations, converged)`` for finite log-odds ``l``, labels ``y`` in {0, 1} and
    positive weights ``w`` with both classes present (so the root is finite)."""
    d = 0.0
    g, h = _score(l, y, w, d)
    if g == 0.0:
        return d, 0, True
    # bracket [lo, hi] with g(lo) > 0 > g(hi)
    step = 1.0
    lo = -np.inf
    hi = np.inf
    if g > 0.0:
        lo = 0.0
        while True:
            gs, _ = _score(l, y, w, step)
            if gs <= 0.0:
                hi = step
                if gs == 0.0:
                    return step, 0, True
                break
            lo = step
            step *= 2.0
            if step > 1e300:
                return np.nan, 0, False
    else:
        hi = 0.0
        while True:
            gs, _ = _score(l, y, w, -step)
            if gs >= 0.0:
                lo = -step
                if gs == 0.0:
                    return -step, 0, True
                break
            hi = -step
            step *= 2.0
            if step > 1e300:
                return np.nan, 0, False
    d = 0.5 * (lo + hi)
    for it in range(1, _MAX_ITER + 1):
        g, h = _score(l, y, w, d)
        if g == 0.0:
            return d, it, True
        if g > 0.0:
            lo = d
        else:
            hi = d
        mid = 0.5 * (lo + hi)
        if not (lo < mid and mid < hi):
            return d, it, True      # the bracket holds no other double
        newton = d + g / h if h > 0.0 else mid
        small = abs(g / h) <= 2.0 ** -50 * max(1.0, abs(d)) if h > 0.0 else False
        if small and lo < newton and newton < hi:
            return newton, it, True
        d = newton if (lo < newton and newton < hi) else mid
    return d, _MAX_ITER, False
