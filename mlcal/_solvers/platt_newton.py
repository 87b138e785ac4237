"""Newton's method with backtracking for Platt's sigmoid (Lin, Lin & Weng 2007), weighted."""

from __future__ import annotations

import numpy as np


def _objective(f, t, w, a, b):
    """Weighted cross-entropy of p = 1/(1+exp(a f + b)) against targets t, evaluated stably."""
    z = a * f + b
    # log(1+e^z) - (1-t) z, split on the sign of z so no exp overflows
    return float(np.dot(w, np.where(z >= 0, t * z + np.log1p(np.exp(-np.abs(z))),
                                    (t - 1.0) * z + np.log1p(np.exp(-np.abs(z))))))


def fit_sigmoid(f: np.ndarray, t: np.ndarray, w: np.ndarray, *, max_iter: int = 100,
                min_step: float = 1e-10, ridge: float = 1e-12, tol: float = 1e-12):
    """Minimise the weighted cross-entropy of ``1/(1+exp(a f + b))`` against targets ``t``.

    Starts at a = 0, b = log((N- + 1)/(N+ + 1)) (weighted counts) as Platt does. Stops when the
    gradient's max-norm is below ``tol`` times the total weight, or after ``max_iter`` steps.

    Returns
    -------
    a, b : float
    n_iter : int
    """
    n_pos = float(np.dot(w, t))
    n_neg = float(w.sum()) - n_pos
    a, b = 0.0, float(np.log((n_neg + 1.0) / (n_pos + 1.0)))
    fval = _objective(f, t, w, a, b)
    scale = float(w.sum())
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        z = a * f + b
        p = np.exp(-np.logaddexp(0.0, z))          # 1/(1+e^z), stable for any z
        d1 = w * (t - p)
        d2 = w * p * (1.0 - p)
        g = np.array([np.dot(d1, f), d1.sum()])
        if np.max(np.abs(g)) < tol * scale:
            break
        h11 = np.dot(d2, f * f) + ridge
        h22 = d2.sum() + ridge
        h21 = np.dot(d2, f)
        det = h11 * h22 - h21 * h21
        da = -(h22 * g[0] - h21 * g[1]) / det
        db = -(-h21 * g[0] + h11 * g[1]) / det
        slope = g[0] * da + g[1] * db
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
