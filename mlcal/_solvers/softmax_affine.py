"""Kernels of the softmax-affine multiclass map ``softmax(W x / T + b)`` and its fit.

Everything is a sequential numba loop over rows and classes with :mod:`detmath`'s exp/log and
no BLAS, so a fitted map (and its JSON) is bit-identical on every CPU; callers sort the rows
first (:func:`canonical_order`) so it does not depend on the row order either.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_exp, det_log


@njit(cache=True, nogil=True)
def _affine_row(x, i, WT, b, inv_t, z):
    """``z = (W x_i) * inv_t + b`` from ``WT = W.T`` (contiguous). Each ``z[k]`` is summed over
    ``j`` in ascending order from 0.0, as a dot product per class would be (the same bits), but
    with ``k`` innermost: independent accumulators the compiler vectorises (a reduction it may
    not reorder is not), about 4x faster at K = 100."""
    K = WT.shape[0]
    for k in range(K):
        z[k] = 0.0
    for j in range(K):
        xj = x[i, j]
        for k in range(K):
            z[k] += WT[j, k] * xj
    for k in range(K):
        z[k] = z[k] * inv_t + b[k]


@njit(cache=True, nogil=True, inline="always")
def _shifted_exp(z, dest):
    """``dest[k] = exp(z[k] - m)`` with ``m = max(z)``; returns ``(m, sum of dest)``. The largest
    term is exp(0) = 1, so nothing overflows and the sum is >= 1."""
    m = z[0]
    for k in range(1, z.shape[0]):
        if z[k] > m:
            m = z[k]
    s = 0.0
    for k in range(z.shape[0]):
        dest[k] = det_exp(z[k] - m)
        s += dest[k]
    return m, s


@njit(cache=True, nogil=True)
def softmax_affine(x, W, b, temperature):
    """Rows of ``softmax(W x_i / temperature + b)``; ``x`` (n, K), ``W`` (K, K), ``b`` (K,)."""
    n, K = x.shape
    out = np.empty((n, K))
    z = np.empty(K)
    inv_t = 1.0 / temperature
    WT = np.ascontiguousarray(W.T)
    for i in range(n):
        _affine_row(x, i, WT, b, inv_t, z)
        row = out[i]
        _, s = _shifted_exp(z, row)
        for k in range(K):
            row[k] /= s
    return out


@njit(cache=True, nogil=True)
def floored_log(s, floor):
    """``det_log(max(s, floor))`` elementwise over an (n, K) array (serial: see the note on
    threads in :mod:`mlcal._solvers.softmax_derivatives`)."""
    n, K = s.shape
    out = np.empty((n, K))
    for i in range(n):
        for k in range(K):
            v = s[i, k]
            out[i, k] = det_log(v if v > floor else floor)
    return out


@njit(cache=True, nogil=True)
def nll_and_gradient(x, y, w, W, b, full):
    """Weighted mean negative log-likelihood of ``softmax(W x + b)`` against class indices
    ``y`` and its gradients ``(dW, db)``; only the diagonal of ``dW`` when ``full`` is False."""
    n, K = x.shape
    z = np.empty(K)
    p = np.empty(K)
    dW = np.zeros((K, K))
    db = np.zeros(K)
    total = 0.0
    wsum = 0.0
    WT = np.ascontiguousarray(W.T)
    for i in range(n):
        _affine_row(x, i, WT, b, 1.0, z)
        m, s = _shifted_exp(z, p)
        c = y[i]
        total += w[i] * (m + det_log(s) - z[c])
        wsum += w[i]
        for k in range(K):
            g = w[i] * (p[k] / s - (1.0 if k == c else 0.0))
            db[k] += g
            if full:
                for j in range(K):
                    dW[k, j] += g * x[i, j]
            else:
                dW[k, k] += g * x[i, k]
    return total / wsum, dW / wsum, db / wsum


@njit(cache=True, nogil=True)
def nll_and_gradient_full(x, y, w, W, b):
    """:func:`nll_and_gradient` with ``full=True``, bit for bit, four rows at a time: each
    ``W`` entry is read once per four rows for the logits, and each ``dW`` entry loaded and
    stored once per four rows, its four row terms added in row order (the same additions in
    the same order as one row at a time, so the same bits; a quarter of the cache traffic,
    which bounds this pass at K = 100)."""
    n, K = x.shape
    Z = np.empty((4, K))
    P = np.empty((4, K))
    G = np.empty((4, K))
    dW = np.zeros((K, K))
    db = np.zeros(K)
    total = 0.0
    wsum = 0.0
    WT = np.ascontiguousarray(W.T)
    i = 0
    while i < n:
        r = 4 if n - i >= 4 else n - i
        for q in range(r):
            for k in range(K):
                Z[q, k] = 0.0
        if r == 4:
            Z0, Z1, Z2, Z3 = Z[0], Z[1], Z[2], Z[3]
            for j in range(K):
                x0, x1, x2, x3 = x[i, j], x[i + 1, j], x[i + 2, j], x[i + 3, j]
                Wj = WT[j]
                for k in range(K):
                    wk = Wj[k]
                    Z0[k] += wk * x0
                    Z1[k] += wk * x1
                    Z2[k] += wk * x2
                    Z3[k] += wk * x3
        else:
            for q in range(r):
                for j in range(K):
                    xq = x[i + q, j]
                    for k in range(K):
                        Z[q, k] += WT[j, k] * xq
        for q in range(r):
            row = i + q
            z = Z[q]
            p = P[q]
            for k in range(K):
                z[k] = z[k] * 1.0 + b[k]
            m, s = _shifted_exp(z, p)
            c = y[row]
            total += w[row] * (m + det_log(s) - z[c])
            wsum += w[row]
            for k in range(K):
                g = w[row] * (p[k] / s - (1.0 if k == c else 0.0))
                G[q, k] = g
                db[k] += g
        if r == 4:
            x0r, x1r, x2r, x3r = x[i], x[i + 1], x[i + 2], x[i + 3]
            for k in range(K):
                g0, g1, g2, g3 = G[0, k], G[1, k], G[2, k], G[3, k]
                dk = dW[k]
                for j in range(K):
                    d = dk[j]
                    d += g0 * x0r[j]
                    d += g1 * x1r[j]
                    d += g2 * x2r[j]
                    d += g3 * x3r[j]
                    dk[j] = d
        else:
            for q in range(r):
                for k in range(K):
                    gk = G[q, k]
                    for j in range(K):
                        dW[k, j] += gk * x[i + q, j]
        i += r
    return total / wsum, dW / wsum, db / wsum


def canonical_order(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row permutation sorting by (x columns, y, w): sums taken in this order do not depend
    on the order the caller passed the rows in (identical rows are interchangeable).

    Sorts by the first column, then re-sorts only the rows that tie on it by all keys (a full
    lexicographic sort of K + 2 keys costs K sorts of all rows; real-valued scores rarely tie).
    """
    first = x[:, 0]
    order = np.argsort(first, kind="stable")
    v = first[order]
    eq = v[1:] == v[:-1]
    tied = np.zeros(len(v), dtype=bool)
    tied[1:] |= eq
    tied[:-1] |= eq
    if tied.any():
        # tie groups are contiguous and stay in place: re-sort their rows by (x0, x1, ..., y, w)
        pos = np.flatnonzero(tied)
        rows = order[pos]
        keys = [w[rows], y[rows]] + [x[rows, j] for j in range(x.shape[1] - 1, 0, -1)]
        order[pos] = rows[np.lexsort(keys + [v[pos]])]
    return order


#: relative predicted decrease below which L-BFGS stops (objective within ~1e-14 of optimal)
ROUNDING_DECREASE = 1e-14
#: above twice this many rows, the softmax-scaling fits start from the optimum of the same
#: objective on a deterministic subsample of about this many rows (:func:`coarse_rows`)
COARSE_ROWS = 8192


def coarse_rows(n: int) -> np.ndarray | None:
    """Indices of every ``ceil(n / COARSE_ROWS)``-th row (of rows already in canonical order,
    so the subsample does not depend on the caller's row order), or None when ``n`` is at
    most ``2 * COARSE_ROWS`` (a warm start would not pay for itself)."""
    if n <= 2 * COARSE_ROWS:
        return None
    return np.arange(0, n, -(-n // COARSE_ROWS))


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    # elementwise product and numpy's own summation: no BLAS, whose order depends on the CPU
    return float(np.sum(a * b))


def lbfgs(fun, theta0: np.ndarray, *, max_iter: int = 500, gtol: float = 1e-10,
          memory: int = 10, rel_decrease: float = ROUNDING_DECREASE,
          history: tuple[list, list] | None = None,
          precondition=None) -> tuple[np.ndarray, int, bool]:
    """Minimise a smooth convex ``fun(theta) -> (value, gradient)`` by L-BFGS with an Armijo
    backtracking line search; deterministic arithmetic (no BLAS).

    Stops when ``max |gradient| <= gtol``, when the decrease the quadratic model predicts is
    below ``rel_decrease`` (default :data:`ROUNDING_DECREASE`) relative to the objective, or
    when no step decreases the objective any more (the optimum to rounding). ``history``, a
    pair of lists ``(steps, gradient changes)``, seeds the curvature memory (a warm start from
    a related problem, e.g. the same objective on a subsample of the rows) and holds the final
    memory on return. ``precondition(q)``, an approximation of ``H^-1 q`` (e.g. from the exact
    Hessian on a subsample), replaces the scalar initial inverse Hessian of the two-loop
    recursion, and the first step is then tried at full length. Returns
    ``(theta, iterations, converged)``.
    """
    theta = np.array(theta0, dtype=np.float64)
    f, g = fun(theta)
    s_hist: list[np.ndarray] = history[0] if history is not None else []
    y_hist: list[np.ndarray] = history[1] if history is not None else []
    for it in range(1, max_iter + 1):
        if float(np.max(np.abs(g))) <= gtol:
            return theta, it - 1, True
        # two-loop recursion for the quasi-Newton direction
        q = g.copy()
        alphas = []
        for s_k, y_k in zip(reversed(s_hist), reversed(y_hist)):
            rho = 1.0 / _dot(y_k, s_k)
            a = rho * _dot(s_k, q)
            alphas.append((a, rho))
            q = q - a * y_k
        if precondition is not None:
            q = precondition(q)
        elif s_hist:
            q = q * (_dot(s_hist[-1], y_hist[-1]) / _dot(y_hist[-1], y_hist[-1]))
        for (s_k, y_k), (a, rho) in zip(zip(s_hist, y_hist), reversed(alphas)):
            q = q + s_k * (a - rho * _dot(y_k, q))
        d = -q
        slope = _dot(g, d)
        if not slope < 0.0:   # not a descent direction: restart from the gradient
            s_hist.clear()
            y_hist.clear()
            d = -g
            slope = _dot(g, d)
        if -slope <= rel_decrease * max(1.0, abs(f)):
            # the predicted decrease (about twice the gap to the optimum on a quadratic) is at
            # the rounding level of f: a line search could only chase rounding noise
            return theta, it - 1, True
        step = 1.0 if s_hist or precondition is not None else \
            min(1.0, 1.0 / float(np.max(np.abs(g))))
        for _ in range(60):
            cand = theta + step * d
            f_new, g_new = fun(cand)
            if f_new <= f + 1e-4 * step * slope:
                break
            step *= 0.5
        else:
            return theta, it, False
        if not f_new < f and float(np.max(np.abs(g_new))) >= float(np.max(np.abs(g))):
            return theta, it, True   # no progress left at double precision
        s_k, y_k = cand - theta, g_new - g
        if _dot(s_k, y_k) > 0.0:
            s_hist.append(s_k)
            y_hist.append(y_k)
            if len(s_hist) > memory:
                s_hist.pop(0)
                y_hist.pop(0)
        theta, f, g = cand, f_new, g_new
    return theta, max_iter, float(np.max(np.abs(g))) <= gtol
