"""Monotone penalised linear spline (P-spline style) fitted by least squares, exactly.

Model: ``p(s) = sum_j theta_j B_j(s)`` with hat functions ``B_j`` on knots ``k_0 < ... < k_K``
(so ``p`` is linear between knots: an exact :class:`~mlcal.maps.LinearMap`). Objective, for
weights ``w`` normalised to sum 1::

    F(theta) = sum_i w_i (y_i - p(s_i))^2 + lam * sum_j (theta_{j+1} - 2 theta_j + theta_{j-1})^2

subject to ``theta_0 <= theta_1 <= ... <= theta_K`` (Eilers & Marx 1996 difference penalty on
the coefficients; monotone coefficients give a monotone spline). With ``theta = L u`` (``L``
lower-triangular ones: ``u_0 = theta_0``, ``u_j = theta_j - theta_{j-1}``) the constraints are
the bounds ``u_j >= 0`` (``j >= 1``) and ``F`` is a convex quadratic ``u' H u - 2 c' u + const``,
minimised exactly by a primal active-set method (Lawson & Hanson 1974, ch. 23): solve the
unconstrained problem on the free set, step back to the first bound met, free the variable with
the most negative gradient; finite, and each solve is a small Cholesky factorisation.

The data enter only through the banded Gram sums ``A = sum_i w_i B(s_i) B(s_i)'`` and
``b = sum_i w_i y_i B(s_i)``, accumulated in one pass in sorted order (no BLAS: the same bits on
every CPU).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_log, log_in_unit


@njit(cache=True, nogil=True)
def _locate(x, knots):
    """Interval index ``j`` (``knots[j] <= x <= knots[j+1]``) and position ``t`` in it."""
    kk = knots.shape[0]
    j = np.searchsorted(knots, x, side="right") - 1
    if j >= kk - 1:
        j = kk - 2
    if j < 0:
        j = 0
    t = (x - knots[j]) / (knots[j + 1] - knots[j])
    return j, min(max(t, 0.0), 1.0)


@njit(cache=True, nogil=True)
def gram_sums(x, ybar, w, knots, use):
    """``(A, b, yy)``: Gram matrix, cross sums and ``sum w y^2`` of the points with
    ``use[i]``, weights normalised by their total (``A`` dense, tridiagonal)."""
    kk = knots.shape[0]
    a = np.zeros((kk, kk))
    b = np.zeros(kk)
    total = 0.0
    for i in range(x.shape[0]):
        if use[i]:
            total += w[i]
    yy = 0.0
    for i in range(x.shape[0]):
        if not use[i]:
            continue
        wi = w[i] / total
        j, t = _locate(x[i], knots)
        s = 1.0 - t
        a[j, j] += wi * s * s
        a[j, j + 1] += wi * s * t
        a[j + 1, j + 1] += wi * t * t
        b[j] += wi * ybar[i] * s
        b[j + 1] += wi * ybar[i] * t
        yy += wi * ybar[i] * ybar[i]
    for j in range(kk - 1):
        a[j + 1, j] = a[j, j + 1]
    return a, b, yy


@njit(cache=True, nogil=True)
def penalised(a, lam):
    """``A + lam * D2' D2`` for the second-difference matrix ``D2``."""
    kk = a.shape[0]
    h = a.copy()
    coef = np.array([1.0, -2.0, 1.0])
    for r in range(kk - 2):          # row r of D2 touches r, r+1, r+2
        for p in range(3):
            for q in range(3):
                h[r + p, r + q] += lam * coef[p] * coef[q]
    return h


@njit(cache=True, nogil=True)
def _to_increments(h, b):
    """``L' H L`` and ``L' b`` (suffix sums), the problem in the increments ``u``."""
    kk = h.shape[0]
    hu = np.zeros((kk, kk))
    bu = np.zeros(kk)
    acc = 0.0
    for i in range(kk - 1, -1, -1):
        acc += b[i]
        bu[i] = acc
    col = np.zeros((kk, kk))   # col[a, j] = sum_{q >= j} h[a, q]
    for a_ in range(kk):
        run = 0.0
        for q in range(kk - 1, -1, -1):
            run += h[a_, q]
            col[a_, q] = run
    for j in range(kk):
        run = 0.0
        for i in range(kk - 1, -1, -1):
            run += col[i, j]
            hu[i, j] = run
    return hu, bu


@njit(cache=True, nogil=True)
def _solve_free(hu, bu, free):
    """Minimiser of ``u' H u - 2 b' u`` over the free coordinates (the others 0), by Cholesky."""
    kk = hu.shape[0]
    idx = np.flatnonzero(free)
    n = idx.shape[0]
    chol = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            s = hu[idx[i], idx[j]]
            for k in range(j):
                s -= chol[i, k] * chol[j, k]
            if i == j:
                chol[i, i] = np.sqrt(max(s, 1e-300))
            else:
                chol[i, j] = s / chol[j, j]
    z = np.zeros(n)
    for i in range(n):
        s = bu[idx[i]]
        for k in range(i):
            s -= chol[i, k] * z[k]
        z[i] = s / chol[i, i]
    for i in range(n - 1, -1, -1):
        s = z[i]
        for k in range(i + 1, n):
            s -= chol[k, i] * z[k]
        z[i] = s / chol[i, i]
    out = np.zeros(kk)
    for i in range(n):
        out[idx[i]] = z[i]
    return out


@njit(cache=True, nogil=True)
def monotone_qp(h, b, start):
    """Minimise ``theta' h theta - 2 b' theta`` over non-decreasing ``theta`` (``h`` positive
    definite), from the constant start ``theta = start``; returns ``theta``."""
    kk = h.shape[0]
    u = np.zeros(kk)
    u[0] = start
    free = np.zeros(kk, dtype=np.bool_)
    free[0] = True
    return _active_set(h, b, u, free)[0]


@njit(cache=True, nogil=True)
def _active_set(h, b, u, free):
    """:func:`monotone_qp`'s primal active-set iterations from the feasible increments ``u``
    (``u[i] >= 0`` for ``i >= 1``, 0 where not ``free``); returns ``(theta, u, free)`` at the
    optimum. The optimum is the solve on its final free set, so any feasible start that ends
    on the same free set gives the same bits."""
    kk = h.shape[0]
    hu, bu = _to_increments(h, b)
    scale = 0.0
    for i in range(kk):
        scale = max(scale, abs(bu[i]), abs(hu[i, i]))
    tol = 1e-13 * scale
    u = u.copy()
    free = free.copy()
    for _ in range(20 * kk + 100):
        z = _solve_free(hu, bu, free)
        alpha = 1.0
        block = -1
        for i in range(1, kk):
            if free[i] and z[i] < 0.0:
                a_ = u[i] / (u[i] - z[i])
                if a_ < alpha or block < 0:
                    alpha = min(a_, alpha)
                    block = i
        if block >= 0:      # a bound is met on the way: move there and fix it
            for i in range(kk):
                u[i] += alpha * (z[i] - u[i])
            u[block] = 0.0
            free[block] = False
            for i in range(1, kk):
                if free[i] and u[i] <= 0.0:
                    u[i] = 0.0
                    free[i] = False
            continue
        u = z
        best = -tol
        enter = -1
        for i in range(1, kk):
            if not free[i]:
                g = 0.0
                for j in range(kk):
                    g += hu[i, j] * u[j]
                g -= bu[i]
                if g < best:
                    best = g
                    enter = i
        if enter < 0:
            break
        free[enter] = True
    theta = np.empty(kk)
    run = 0.0
    for i in range(kk):
        run += u[i]
        theta[i] = run
    return theta, u, free


@njit(cache=True, nogil=True)
def held_out_log_loss(x, ybar, w, use, knots, theta, eps):
    """Weighted log loss of ``interp(x, knots, theta)`` (clipped to ``[eps, 1 - eps]``) on the
    points with ``use[i]``; weights as given (not normalised)."""
    loss = 0.0
    for i in range(x.shape[0]):
        if not use[i]:
            continue
        j, t = _locate(x[i], knots)
        p = (1.0 - t) * theta[j] + t * theta[j + 1]
        p = min(max(p, eps), 1.0 - eps)
        yi = ybar[i]
        if yi > 0.0:     # most collapsed points have one label: skip the vanishing term's log
            loss -= w[i] * yi * det_log(p)
        if yi < 1.0:
            loss -= w[i] * (1.0 - yi) * det_log(1.0 - p)
    return loss


@njit(cache=True, nogil=True)
def grid_held_out_losses(a, b, start, grid, x, ybar, w, use, knots, eps):
    """Per penalty ``grid[g]``: :func:`held_out_log_loss` on the points with ``use[i]`` of
    ``monotone_qp(penalised(a, grid[g]), b, start)``, in one call: the held-out points are
    located among the knots once instead of once per penalty (same operations), and each QP
    starts from the previous penalty's solution (the same optimum; the same bits whenever it
    ends on the same free set as the cold start, which is the rule: checked against
    the cold loop in tests/test_fit_collapsed.py)."""
    n_use = 0
    for i in range(x.shape[0]):
        if use[i]:
            n_use += 1
    idx = np.empty(n_use, dtype=np.int64)
    pos = np.empty(n_use)
    m = 0
    for i in range(x.shape[0]):
        if use[i]:
            j, t = _locate(x[i], knots)
            idx[m] = j
            pos[m] = t
            m += 1
    out = np.empty(grid.shape[0])
    screened = 2.0**-1022 <= eps < 0.5   # (CV_CLIP = 1e-6)
    kk = a.shape[0]
    u = np.zeros(kk)
    u[0] = start
    free = np.zeros(kk, dtype=np.bool_)
    free[0] = True
    pp = np.empty(n_use)   # the held-out predictions of one penalty and their two logs
    lp = np.empty(n_use)
    lq = np.empty(n_use)
    for g in range(grid.shape[0]):
        # from the previous penalty's optimum: the same free set, hence the same bits, in
        # far fewer active-set steps (the optimum is the solve on its final free set)
        theta, u, free = _active_set(penalised(a, grid[g]), b, u, free)
        for m in range(n_use):
            j = idx[m]
            t = pos[m]
            p = (1.0 - t) * theta[j] + t * theta[j + 1]
            pp[m] = min(max(p, eps), 1.0 - eps)
        if screened:
            # log_in_unit of every prediction and of its complement in two plain loops (they
            # vectorise); used below exactly where the per-point loop used them
            for m in range(n_use):
                lp[m] = log_in_unit(pp[m])
            for m in range(n_use):
                lq[m] = log_in_unit(1.0 - pp[m])
        loss = 0.0
        m = 0
        for i in range(x.shape[0]):
            if not use[i]:
                continue
            p = pp[m]
            yi = ybar[i]
            if screened and p == p:
                # p and 1 - p are normal numbers in (0, 1]: det_log's value without its tests
                if yi > 0.0:
                    loss -= w[i] * yi * lp[m]
                if yi < 1.0:
                    loss -= w[i] * (1.0 - yi) * lq[m]
                m += 1
                continue
            m += 1
            if yi > 0.0:
                loss -= w[i] * yi * det_log(p)
            if yi < 1.0:
                loss -= w[i] * (1.0 - yi) * det_log(1.0 - p)
        out[g] = loss
    return out
