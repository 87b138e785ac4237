"""Newton's method with backtracking for Platt's sigmoid (Lin, Lin & Weng 2007), weighted.

The per-iteration passes over the data are fused numba loops: one for the objective, one for
gradient and Hessian together, so a fit costs a few O(N) sweeps without temporaries.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_exp, det_log, det_log1p


@njit(cache=True, nogil=True)
def _objective(f, t, w, a, b):
    """sum w (log(1+e^z) - (1-t) z) with z = a f + b, the weighted cross-entropy of
    p = 1/(1+e^z) against targets t; split on the sign of z so no exp overflows."""
    total = 0.0
    for i in range(f.shape[0]):
        z = a * f[i] + b
        if z >= 0.0:
            total += w[i] * (t[i] * z + det_log1p(det_exp(-z)))
        else:
            total += w[i] * ((t[i] - 1.0) * z + det_log1p(det_exp(z)))
    return total


@njit(cache=True, nogil=True)
def _gradient_hessian(f, t, w, a, b):
    g0 = g1 = h11 = h21 = h22 = 0.0
    for i in range(f.shape[0]):
        z = a * f[i] + b
        if z >= 0.0:
            e = det_exp(-z)
            p = e / (1.0 + e)  # 1/(1+e^z)
        else:
            p = 1.0 / (1.0 + det_exp(z))
        d1 = w[i] * (t[i] - p)
        d2 = w[i] * p * (1.0 - p)
        g0 += d1 * f[i]
        g1 += d1
        h11 += d2 * f[i] * f[i]
        h21 += d2 * f[i]
        h22 += d2
    return g0, g1, h11, h21, h22


def fit_sigmoid(f: np.ndarray, t: np.ndarray, w: np.ndarray, *, max_iter: int = 100,
                min_step: float = 1e-10, ridge: float = 1e-12, tol: float = 1e-12):
    """Minimise the weighted cross-entropy of ``1/(1+exp(a f + b))`` against targets ``t``.

    Starts at a = 0, b = log((N- + 1)/(N+ + 1)) (weighted counts) as Platt does. Stops when the
    gradient's max-norm is below ``tol`` times the total weight, when the Newton decrement falls
    below the objective's rounding error (1e-15 relative), when the line search cannot
    decrease the objective any more (step below ``min_step``), or after ``max_iter`` steps.

    Returns
    -------
    a, b : float
    n_iter : int
    """
    f = np.ascontiguousarray(f, dtype=np.float64)
    t = np.ascontiguousarray(t, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    n_pos = float(np.sum(w * t))   # not np.dot: BLAS kernels sum in a CPU-specific order
    n_neg = float(w.sum()) - n_pos
    a, b = 0.0, float(det_log((n_neg + 1.0) / (n_pos + 1.0)))
    fval = _objective(f, t, w, a, b)
    scale = float(w.sum())
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        g0, g1, h11, h21, h22 = _gradient_hessian(f, t, w, a, b)
        if max(abs(g0), abs(g1)) < tol * scale:
            break
        h11 += ridge
        h22 += ridge
        det = h11 * h22 - h21 * h21
        da = -(h22 * g0 - h21 * g1) / det
        db = -(-h21 * g0 + h11 * g1) / det
        slope = g0 * da + g1 * db
        if -slope <= 1e-15 * abs(fval):
            # the predicted decrease is below the objective's rounding error, so the line search
            # cannot judge the step; this close to the optimum the full Newton step is exact
            a, b = a + da, b + db
            break
        step = 1.0
        while step >= min_step:
            na, nb = a + step * da, b + step * db
            nf = _objective(f, t, w, na, nb)
            if nf <= fval + 1e-4 * step * slope:
                a, b, fval = na, nb, nf
                break
            step /= 2.0
        else:
            break  # no further decrease possible at machine precision
    return a, b, n_iter
