"""Weighted logistic regression on a few features (k <= 3) by Newton's method with backtracking,
deterministic, plus the non-negativity rule of beta calibration.

Minimises ``L(theta) = sum_i w_i (log(1 + exp(z_i)) - t_i z_i)``, ``z_i = sum_j theta_j x_ij``
(+ an intercept), the cross-entropy of ``p = expit(z)`` against targets ``t`` in [0, 1]. ``L`` is
convex; its gradient is ``sum w (p - t) x`` and its Hessian ``sum w p (1 - p) x x^T``.

Every sum is a sequential loop over the (caller-sorted) rows, exp/log come from
:mod:`mlcal._solvers.detmath`, and the k x k Newton system is solved by Gaussian elimination
with partial pivoting in plain IEEE arithmetic, so the result has the same bits on every CPU.

Conditioning: each feature is standardised first (weighted mean and standard deviation with
an intercept, weighted root mean square without one, via :func:`platt_newton.standardise`'s
power-of-two prescaling) and the coefficients are mapped back; the ridge and stopping tolerance
then mean the same thing whatever the scale of the scores. Stopping follows
:mod:`mlcal._solvers.platt_newton`: gradient below ``tol`` times the total weight, or full
Newton steps once the predicted decrease is below the objective's rounding error.

Warm start: above :data:`~mlcal._solvers.platt_newton.WARM_POINTS` (2,000) rows, the same
penalised fit first runs on that many groups of consecutive rows (weighted mean features and
targets, total weights; :func:`~mlcal._solvers.platt_newton.group_rows`, integer boundaries on
the caller's canonical order, so row-order independent), and the full-data Newton starts from
its optimum with the same stopping test. The optimum is the same; the full data need two to
four passes instead of about seven. The result's last bits differ from a start at zero. That
coarse fit (and any fit of more than :data:`SMALL_WARM_POINTS` = 200 and at most 2,000 rows,
such as ``auto``'s fold fits on 2,000 cells) starts in turn from the fit on 200 groups.

The loss pass with logarithms runs only where the line search needs the objective: after a
full Newton step taken without line search the probabilities come from an exponential-only
pass and the objective is left to the caller (``with_loss``). Such a step from a small
gradient ends the run when the previous full step's contraction predicts the next gradient far
below the tolerance (:data:`LAST_STEP_FACTOR`), saving the pass that would only confirm it. A step that would go to the line search is taken
whole without its loss pass when no row's linear predictor moves by more than
:data:`SAFE_STEP_Z`, where the Armijo test provably passes (same ``theta``); and the start's
objective (for the rounding bound of the step test) is computed only when a bound without
logarithms (:func:`_probabilities_bound`) cannot decide that test (same decisions).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_exp, det_log1p
from mlcal._solvers.platt_newton import (EPS, POLISH_STEPS, SMALL_WARM_POINTS, WARM_POINTS,
                                         coarse_to_fine_start, group_rows,
                                         scale_by_power_of_two, standardise, unit_weights)

#: |z| beyond which a fitted probability is 0 or 1 to within exp(-700): an MLE that needs it is
#: at infinity (the labels are separable by the features)
DIVERGED_Z = 700.0
#: a Newton run stopped by an underflowed gradient on separable labels has every |z| beyond ~27
SATURATED_Z = 20.0
#: a full Newton step taken (below the line search's resolution) from a gradient ``g`` (max
#: norm per unit weight) under this many times the stopping tolerance is the last one when the
#: previous full step's contraction predicts the next gradient far below the tolerance: with
#: quadratic convergence ``g_next ~ C g**2``, ``C`` estimated as ``g / g_prev**2`` from the
#: previous full step (2-8 on the benchmark's fits); the step is taken and the pass that would
#: only confirm ``g_next < tol`` is saved. On slow (near-separable) problems the estimate is
#: large and the rule does not fire
LAST_STEP_FACTOR = 1e4
#: the predicted next gradient must be below this fraction of the tolerance
LAST_STEP_MARGIN = 1e-2
#: a full Newton step ``d`` that changes no row's linear predictor by more than this passes
#: the Armijo test (sufficient decrease ``1e-4``) in exact arithmetic, so the line search's
#: loss pass (a logarithm per row) is skipped. The logistic loss has ``|phi'''| <= phi''``, so
#: along ``d`` with ``M = max_i |x_i . d|`` the objective's second derivative grows at most
#: like ``exp(M s)``, and ``f(theta + d) - f(theta) <= slope (1 - (e^M - 1 - M) / M^2)``
#: (``slope = g . d = -d^T (H + ridge) d``): at ``M = 1``, ``0.28 slope``, far below
#: ``1e-4 slope``; and the decrease is far above the loss's rounding (the rule applies only
#: where ``-slope`` exceeds the rounding bound). Where the line search accepts the full step
#: (always so far) the same ``theta`` to the bit
SAFE_STEP_Z = 1.0
#: the bound of :func:`_probabilities_bound` times this is above the loss as computed (the
#: sums' relative rounding errors are below ``n EPS``, far below 1 %)
ROUNDING_BOUND_SLACK = 1.01


@njit(cache=True, nogil=True)
def _row_z(x, theta, i):
    """Row ``i``'s linear predictor ``sum_j theta[j] x[i, j]``, summed in column order (every
    pass computes ``z`` this one way, so the passes agree to the bit)."""
    z = 0.0
    for j in range(x.shape[1]):
        z += theta[j] * x[i, j]
    return z


@njit(cache=True, nogil=True)
def _loss(x, t, w, theta):
    total = 0.0
    for i in range(x.shape[0]):
        z = _row_z(x, theta, i)
        if z >= 0.0:   # split on the sign so that exp never overflows
            total += w[i] * ((1.0 - t[i]) * z + det_log1p(det_exp(-z)))
        else:
            total += w[i] * (det_log1p(det_exp(z)) - t[i] * z)
    return total


@njit(cache=True, nogil=True)
def _expit_parts(z):
    """``(exp(-|z|), expit(z))`` with the exponential that never overflows (``det_exp``): the
    loss's ``log1p`` term and the gradient's probability from one exponential."""
    if z >= 0.0:
        e = det_exp(-z)
        return e, 1.0 / (1.0 + e)
    e = det_exp(z)
    return e, e / (1.0 + e)


@njit(cache=True, nogil=True)
def _loss_probabilities(x, t, w, theta, p):
    """:func:`_loss`, also writing each row's ``expit(z)`` into ``p`` exactly as
    the gradient needs it (the same ``det_exp`` value), and ``max |z|``: the
    gradient at an accepted line-search point then costs no second exponential."""
    total = 0.0
    zmax = 0.0
    for i in range(x.shape[0]):
        z = _row_z(x, theta, i)
        zmax = max(zmax, abs(z))
        e, p[i] = _expit_parts(z)
        if z >= 0.0:
            total += w[i] * ((1.0 - t[i]) * z + det_log1p(e))
        else:
            total += w[i] * (det_log1p(e) - t[i] * z)
    return total, zmax


@njit(cache=True, nogil=True)
def _probabilities(x, theta, p):
    """Each row's ``expit(z)`` into ``p`` and ``max |z|``, exactly as
    :func:`_loss_probabilities` computes them, without the loss (no ``det_log1p``): for the
    points where Newton needs the gradient but not the objective."""
    zmax = 0.0
    for i in range(x.shape[0]):
        z = _row_z(x, theta, i)
        zmax = max(zmax, abs(z))
        _, p[i] = _expit_parts(z)
    return zmax


@njit(cache=True, nogil=True)
def _probabilities_bound(x, t, w, theta, p):
    """:func:`_probabilities` (the same ``p`` and ``max |z|``), and an upper bound on
    :func:`_loss` at ``theta`` without logarithms: ``log1p(e) <= e`` in each row's term (as
    the loss is then ``>= 0``; NaN, i.e. no bound, for a target outside [0, 1] or a negative
    weight)."""
    total = 0.0
    zmax = 0.0
    for i in range(x.shape[0]):
        if not (0.0 <= t[i] <= 1.0 and w[i] >= 0.0):
            total = np.nan
        z = _row_z(x, theta, i)
        zmax = max(zmax, abs(z))
        e, p[i] = _expit_parts(z)
        if z >= 0.0:
            total += w[i] * ((1.0 - t[i]) * z + e)
        else:
            total += w[i] * (e - t[i] * z)
    return zmax, total


@njit(cache=True, nogil=True)
def _same(a, b):
    for j in range(a.size):
        if a[j] != b[j]:
            return False
    return True


@njit(cache=True, nogil=True)
def _gradient_hessian_from(x, t, w, p):
    """The gradient and Hessian of :func:`_loss` from the rows' probabilities ``p`` (as
    :func:`_loss_probabilities` writes them)."""
    k = x.shape[1]
    g = np.zeros(k)
    h = np.zeros((k, k))
    n = x.shape[0]
    # k = 1-3 written out with scalar accumulators (about 3x faster than the indexed loop):
    # each sum still runs over the rows in order with the same products, so the same bits
    if k == 3:
        g0 = g1 = g2 = h00 = h10 = h11 = h20 = h21 = h22 = 0.0
        for i in range(n):
            d1 = w[i] * (p[i] - t[i])
            d2 = w[i] * p[i] * (1.0 - p[i])
            x0 = x[i, 0]
            x1 = x[i, 1]
            x2 = x[i, 2]
            g0 += d1 * x0
            g1 += d1 * x1
            g2 += d1 * x2
            h00 += d2 * x0 * x0
            h10 += d2 * x1 * x0
            h11 += d2 * x1 * x1
            h20 += d2 * x2 * x0
            h21 += d2 * x2 * x1
            h22 += d2 * x2 * x2
        g[0], g[1], g[2] = g0, g1, g2
        h[0, 0], h[1, 0], h[1, 1], h[2, 0], h[2, 1], h[2, 2] = h00, h10, h11, h20, h21, h22
    elif k == 2:
        g0 = g1 = h00 = h10 = h11 = 0.0
        for i in range(n):
            d1 = w[i] * (p[i] - t[i])
            d2 = w[i] * p[i] * (1.0 - p[i])
            x0 = x[i, 0]
            x1 = x[i, 1]
            g0 += d1 * x0
            g1 += d1 * x1
            h00 += d2 * x0 * x0
            h10 += d2 * x1 * x0
            h11 += d2 * x1 * x1
        g[0], g[1] = g0, g1
        h[0, 0], h[1, 0], h[1, 1] = h00, h10, h11
    elif k == 1:
        g0 = h00 = 0.0
        for i in range(n):
            d1 = w[i] * (p[i] - t[i])
            d2 = w[i] * p[i] * (1.0 - p[i])
            x0 = x[i, 0]
            g0 += d1 * x0
            h00 += d2 * x0 * x0
        g[0] = g0
        h[0, 0] = h00
    else:
        for i in range(n):
            d1 = w[i] * (p[i] - t[i])
            d2 = w[i] * p[i] * (1.0 - p[i])
            for j in range(k):
                g[j] += d1 * x[i, j]
                for m in range(j + 1):
                    h[j, m] += d2 * x[i, j] * x[i, m]
    for j in range(k):
        for m in range(j):
            h[m, j] = h[j, m]
    return g, h


@njit(cache=True, nogil=True)
def _with_penalty(f, th, lam, k):
    """``f`` plus ``sum_j lam_j / 2 th_j^2`` (a sequential sum over <= 3 terms: same bits
    everywhere)."""
    for j in range(k):
        if lam[j] != 0.0:
            f += 0.5 * lam[j] * th[j] * th[j]
    return f


def _newton(g_x, t, w, theta, lam, k, max_iter, min_step, ridge, tol):
    """Damped Newton on standardised features from ``theta``: ``(theta, fval, zmax,
    converged)`` with ``fval`` the penalised objective at the returned ``theta``, or ``None``
    when the run ended with full Newton steps and did not need it (the caller computes it
    with :func:`_penalised_loss` if it does: the same bits), and ``zmax`` the largest ``|z|``
    at the returned ``theta``. The iterations run in one compiled loop
    (:func:`_newton_loop`); the total weight is NumPy's pairwise sum, as before."""
    theta, fval, known, zmax, converged = _newton_loop(
        g_x, t, w, np.array(theta, dtype=np.float64), lam, k, max_iter, min_step, ridge, tol,
        float(np.sum(w)), 64.0 * t.size * EPS, POLISH_STEPS, LAST_STEP_FACTOR * tol,
        SAFE_STEP_Z, ROUNDING_BOUND_SLACK)
    return theta, (float(fval) if known else None), float(zmax), bool(converged)


def _penalised_loss(g_x, t, w, theta, lam, k) -> float:
    """The penalised objective at ``theta`` (the value :func:`_newton_loop` computes at an
    accepted point: the same operations)."""
    return float(_with_penalty(_loss(g_x, t, w, theta), theta, lam, k))


@njit(cache=True, nogil=True, error_model="numpy")
def _newton_loop(g_x, t, w, theta, lam, k, max_iter, min_step, ridge, tol, scale, round_unit,
                 polish_steps, last_tol, safe_z, bound_slack):
    """The damped Newton iterations of :func:`_newton`, compiled: the operations of the former
    Python loop in the same order (the gradient norm, the k x k solve :func:`_solve`, the
    slope as NumPy sums k <= 3 terms, Armijo backtracking from the full step by halving it as
    Platt's solver does), so the same bits, without the Python cost of each iteration."""
    n = t.size
    kk = theta.size
    # ``p`` holds expit(z) at ``theta`` whenever ``cached`` (the loss at an accepted point
    # computed it), so the next gradient needs no exponentials; bits as without the cache
    p = np.empty(n)
    trial = np.empty(n)
    # the start's objective is needed for the rounding bound ``round_unit (|f0| + scale)`` of
    # the step test, and by a line search from the start: it is computed (a logarithm per
    # row) only when one needs it. ``f0 >= 0`` and ``f0 <= ubound`` (ROUNDING_BOUND_SLACK),
    # so a test that those bounds decide needs no f0: the same decisions as with it
    zmax, ubound = _probabilities_bound(g_x, t, w, theta, p)
    ubound = _with_penalty(ubound, theta, lam, k)
    theta0 = theta.copy()
    fval = 0.0
    cached = True    # p and zmax are those of theta
    known = False    # fval is not
    rounding = -1.0  # unknown until needed (f0)
    polish = 0
    converged = False
    gprev = 0.0        # gradient (max norm / scale) before the last step, if a full one
    full_prev = False  # whether the last step was a full Newton step
    penalised = False
    for j in range(kk):
        if lam[j] != 0.0:
            penalised = True
    for _ in range(max_iter):
        if cached:
            grad, hess = _gradient_hessian_from(g_x, t, w, p)
        else:
            # only after a full step without line search (polish), where no later decision
            # reads the objective: the probabilities without the loss's log1p (same p bits;
            # the objective is left to the caller, who computes it only if needed). Two
            # passes: faster than one fused pass at k = 3, as fast at k = 1
            zmax = _probabilities(g_x, theta, p)
            grad, hess = _gradient_hessian_from(g_x, t, w, p)
            known = False
            cached = True
        if penalised:
            grad = grad + lam * theta
            for j in range(kk):
                hess[j, j] += lam[j]
        if kk == 0:
            converged = True
            break
        gmax = abs(grad[0])
        for j in range(1, kk):
            a = abs(grad[j])
            if a > gmax or a != a:   # NaN propagates, as in np.max
                gmax = a
        if gmax < tol * scale:
            converged = True
            break
        for j in range(kk):
            hess[j, j] += ridge
        d = -_solve(hess, grad)
        slope = -0.0   # NumPy sums fewer than 8 terms in order from -0.0
        for j in range(kk):
            slope += grad[j] * d[j]
        below = False   # -slope <= rounding, decided without f0 where the bounds allow
        if not polish:
            if rounding >= 0.0:
                below = -slope <= rounding
            elif -slope <= round_unit * scale:
                below = True
            elif not -slope > round_unit * (bound_slack * ubound + scale):
                f0 = _with_penalty(_loss(g_x, t, w, theta0), theta0, lam, k)
                rounding = round_unit * (abs(f0) + scale)
                below = -slope <= rounding
                if not known and cached and polish == 0 and _same(theta, theta0):
                    fval = f0   # still at the start
                    known = True
        if not polish and not below and _max_abs_z(g_x, d) <= safe_z:
            # the full step passes the Armijo test (SAFE_STEP_Z): taken as the line search
            # would take it, without the loss at the new point (left unknown)
            theta = theta + d
            cached = False
            gprev = gmax / scale
            full_prev = True
            continue
        if below or polish:
            # below the objective's rounding the line search cannot judge a step; this close
            # to the optimum full Newton steps converge quadratically
            theta = theta + d
            cached = False
            polish += 1
            g_rel = gmax / scale
            if polish >= polish_steps or (full_prev and gmax < last_tol * scale and gprev > 0.0
                                          and g_rel * g_rel * g_rel
                                          < LAST_STEP_MARGIN * tol * gprev * gprev):
                converged = True   # (LAST_STEP_FACTOR: the step ends far below tol)
                break
            gprev = g_rel
            full_prev = True
            continue
        if not known:   # at the start, or after a step taken by the SAFE_STEP_Z rule
            fval = _with_penalty(_loss(g_x, t, w, theta), theta, lam, k)
            known = True
        # Armijo backtracking from the full step, halving it
        step = 1.0
        found = False
        nf = 0.0
        tz = 0.0
        while step >= min_step:
            th = theta + step * d
            nf, tz = _loss_probabilities(g_x, t, w, th, trial)
            nf = _with_penalty(nf, th, lam, k)
            if nf <= fval + 1e-4 * step * slope:
                found = True
                break
            step /= 2.0
        if not found:
            converged = True   # no further decrease at machine precision
            break
        fval = nf
        known = True
        gprev = gmax / scale
        full_prev = step == 1.0
        theta = theta + step * d
        zmax = tz
        p, trial = trial, p   # the accepted step was the last one evaluated
    if not cached:
        zmax = _max_abs_z(g_x, theta)
        known = False
    return theta, fval, known, zmax, converged


@njit(cache=True, nogil=True)
def _max_abs_z(x, theta):
    """``max |z|`` over the rows, as :func:`_loss_probabilities` computes it."""
    zmax = 0.0
    for i in range(x.shape[0]):
        z = _row_z(x, theta, i)
        zmax = max(zmax, abs(z))
    return zmax


@njit(cache=True, nogil=True, error_model="numpy")
def _solve(h, g):
    """``h^-1 g`` by Gaussian elimination with partial pivoting (k <= 3, no BLAS/LAPACK)."""
    k = g.size
    a = np.empty((k, k + 1))
    for r in range(k):
        for c in range(k):
            a[r, c] = h[r, c]
        a[r, k] = g[r]
    for col in range(k):
        piv = col   # the first largest |a[r, col]|, as np.argmax
        for r in range(col + 1, k):
            if abs(a[r, col]) > abs(a[piv, col]):
                piv = r
        if piv != col:
            for c in range(k + 1):
                a[col, c], a[piv, c] = a[piv, c], a[col, c]
        for r in range(col + 1, k):
            f = a[r, col] / a[col, col]
            for c in range(col, k + 1):
                a[r, c] = a[r, c] - f * a[col, c]
    out = np.zeros(k)
    for r in range(k - 1, -1, -1):
        acc = a[r, k]
        for c in range(r + 1, k):
            acc -= a[r, c] * out[c]
        out[r] = acc / a[r, r]
    return out


#: NumPy's pairwise summation (``np.add.reduce`` of a contiguous float64 array: blocks of at
#: most this many terms summed by eight interleaved accumulators, halves combined recursively)
_PAIRWISE_BLOCK = 128


@njit(cache=True, nogil=True)
def _term(f, w, scale, m, mode, i):
    """Term ``i`` of the sums of :func:`_standardise_column`, with ``fs = f * scale``:
    ``fs``, ``w fs``, ``(fs - m)^2``, ``(w (fs - m)) (fs - m)`` for modes 0-3 (NumPy's
    ``fs``, ``w * fs``, ``d * d``, ``w * d * d``, the same operations)."""
    fs = f[i] * scale
    if mode == 0:
        return fs
    if mode == 1:
        return w[i] * fs
    d = fs - m
    if mode == 2:
        return d * d
    return w[i] * d * d


@njit(cache=True, nogil=True)
def _pairwise_block(f, w, scale, m, mode, lo, n):
    """A leaf of NumPy's pairwise sum (``pairwise_sum`` of its add loop, ``n <= 128`` terms
    ``lo ..`` of :func:`_term`): eight interleaved accumulators, combined as a tree, then the
    remainder in order."""
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += _term(f, w, scale, m, mode, i)
        return res
    r0 = _term(f, w, scale, m, mode, lo)
    r1 = _term(f, w, scale, m, mode, lo + 1)
    r2 = _term(f, w, scale, m, mode, lo + 2)
    r3 = _term(f, w, scale, m, mode, lo + 3)
    r4 = _term(f, w, scale, m, mode, lo + 4)
    r5 = _term(f, w, scale, m, mode, lo + 5)
    r6 = _term(f, w, scale, m, mode, lo + 6)
    r7 = _term(f, w, scale, m, mode, lo + 7)
    i = 8
    top = n - n % 8
    while i < top:
        j = lo + i
        r0 += _term(f, w, scale, m, mode, j)
        r1 += _term(f, w, scale, m, mode, j + 1)
        r2 += _term(f, w, scale, m, mode, j + 2)
        r3 += _term(f, w, scale, m, mode, j + 3)
        r4 += _term(f, w, scale, m, mode, j + 4)
        r5 += _term(f, w, scale, m, mode, j + 5)
        r6 += _term(f, w, scale, m, mode, j + 6)
        r7 += _term(f, w, scale, m, mode, j + 7)
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += _term(f, w, scale, m, mode, lo + i)
        i += 1
    return res


@njit(cache=True, nogil=True)
def _scaled_sum(f, w, scale, m, mode):
    """``np.sum`` of the terms of :func:`_term` over all rows, without materialising them:
    NumPy's pairwise sum (blocks of at most :data:`_PAIRWISE_BLOCK` terms; a longer range is
    split at half its length rounded down to a multiple of 8 and the halves' sums added), the
    same additions in the same order, added to the identity 0.0 as NumPy's reduction does.
    The recursion runs on an explicit stack (numba's disk cache mishandles recursive
    kernels)."""
    # tasks: (lo, n) to sum, or n = -1: add the two sums on top of the value stack
    task_lo = np.empty(256, dtype=np.int64)
    task_n = np.empty(256, dtype=np.int64)
    vals = np.empty(256)
    nt = 1
    nv = 0
    task_lo[0] = 0
    task_n[0] = f.shape[0]
    while nt > 0:
        nt -= 1
        lo = task_lo[nt]
        n = task_n[nt]
        if n < 0:
            b = vals[nv - 1]
            a = vals[nv - 2]
            nv -= 1
            vals[nv - 1] = a + b
        elif n <= _PAIRWISE_BLOCK:
            vals[nv] = _pairwise_block(f, w, scale, m, mode, lo, n)
            nv += 1
        else:
            n2 = n // 2
            n2 -= n2 % 8
            task_lo[nt] = 0   # add the halves' sums once both are done
            task_n[nt] = -1
            task_lo[nt + 1] = lo + n2   # the right half, summed second
            task_n[nt + 1] = n - n2
            task_lo[nt + 2] = lo        # the left half, summed first
            task_n[nt + 2] = n2
            nt += 3
    return 0.0 + vals[0]


@njit(cache=True, nogil=True)
def _max_abs(f):
    """``np.max(np.abs(f))`` of a non-empty array (NaN if any entry is NaN)."""
    top = 0.0
    nan = False
    for i in range(f.shape[0]):
        a = abs(f[i])
        if a > top:
            top = a
        elif a != a:
            nan = True
    return np.nan if nan else top


@njit(cache=True, nogil=True)
def _write_scaled(f, scale, m, sd, out):
    """``out = (f * scale - m) / sd`` (NumPy's ``(fs - m) / sd``; ``m = 0``: ``fs / sd``,
    as ``fs - 0.0`` is ``fs``)."""
    for i in range(f.shape[0]):
        out[i] = (f[i] * scale - m) / sd


def _standardise_column(f: np.ndarray, w: np.ndarray, wt: float, unit: bool, centre: bool,
                        out: np.ndarray) -> tuple[float, float]:
    """One column of :func:`_scale_columns` written into ``out``, fused (four passes over
    ``f``, no temporaries): with ``centre``, :func:`platt_newton.standardise`'s ``g`` and
    ``(shift, scale)``; without, the power-of-two prescaled column divided by its weighted
    root mean square. Every sum is NumPy's pairwise sum of the same terms in the same order
    and the divisions and square roots are Python's, so the same bits as the NumPy code
    (kept for the cases the fused kernels do not cover: an empty column, a prescale beyond
    ``2**+-1000``)."""
    if f.size == 0:
        top = float(np.max(np.abs(f)))   # (raises as before)
    top = float(_max_abs(f))
    e = math.frexp(top)[1] if 0.0 < top < math.inf else 0
    if not -1000 < -e < 1000:
        return None
    scale = 2.0 ** -e
    if centre:
        m = float(_scaled_sum(f, w, scale, 0.0, 0 if unit else 1)) / wt
        sd = math.sqrt(float(_scaled_sum(f, w, scale, m, 2 if unit else 3)) / wt)
        if not sd > 0.0:
            sd = math.ldexp(1.0, -e)
        _write_scaled(f, scale, m, sd, out)
        return m / sd * math.ldexp(sd, e), math.ldexp(sd, e)
    rms = math.sqrt(float(_scaled_sum(f, w, scale, 0.0, 2 if unit else 3)) / wt)
    rms = rms if rms > 0.0 else 1.0
    _write_scaled(f, scale, 0.0, rms, out)
    return 0.0, math.ldexp(rms, e)


def _scale_columns(cols, w: np.ndarray, intercept: bool):
    """The standardised feature columns ``cols`` (+ a column of ones with an intercept) as one
    C-contiguous ``n x k`` array, each written in place (no stacking copy), and per column
    (shift, scale) so that ``x_j = shift_j + scale_j * g_j``."""
    n = w.size
    shifts, scales = [], []
    g = np.empty((n, len(cols) + (1 if intercept else 0)))
    wt = float(np.sum(w))
    unit = unit_weights(w)
    for j, f in enumerate(cols):
        f = np.ascontiguousarray(f)
        fused = _standardise_column(f, w, wt, unit, intercept, g[:, j])
        if fused is not None:
            shifts.append(fused[0])
            scales.append(fused[1])
            continue
        if intercept:
            _, m_over_sd, sd = standardise(f, w, out=g[:, j])
            shifts.append(m_over_sd * sd)
            scales.append(sd)
            continue
        top = float(np.max(np.abs(f)))
        e = math.frexp(top)[1] if 0.0 < top < math.inf else 0
        fs = scale_by_power_of_two(f, -e)
        ff = fs * fs if unit else w * fs * fs
        rms = math.sqrt(float(np.sum(ff)) / wt)   # IEEE sqrt: same bits everywhere
        rms = rms if rms > 0.0 else 1.0
        np.divide(fs, rms, out=g[:, j])
        shifts.append(0.0)
        scales.append(math.ldexp(rms, e))
    if intercept:
        g[:, len(cols)] = 1.0
    return g, shifts, scales


def _columns(x, n: int) -> list[np.ndarray]:
    """The feature columns of ``x``: an ``n x k`` array, or a tuple of ``k`` arrays of ``n``
    values each (the caller's columns as they are, no stacking copy)."""
    if isinstance(x, tuple):
        cols = [np.asarray(c, dtype=np.float64) for c in x]
        if any(c.shape != (n,) for c in cols):
            raise ValueError(f"every feature column must hold {n} values")
        return cols
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(n, -1)
    return [x[:, j] for j in range(x.shape[1])]


def fit_logistic(x: np.ndarray, t: np.ndarray, w: np.ndarray, *, intercept: bool,
                 start_intercept: float = 0.0, max_iter: int = 100, min_step: float = 1e-10,
                 ridge: float = 1e-12, tol: float = 1e-12, penalty=None,
                 warm_points: int | None = WARM_POINTS, with_loss: bool = True):
    """Minimise the weighted cross-entropy of ``expit(x @ coef + intercept)`` against ``t``,
    plus an optional ridge penalty on the standardised coefficients.

    Parameters
    ----------
    x : array of shape (n, k), k <= 3, or tuple of k arrays of shape (n,)
        Features, rows in a canonical (sorted) order (a tuple: the columns, not stacked).
    t, w : arrays of shape (n,)
        Targets in [0, 1] and positive weights.
    intercept : bool
        Fit an intercept too (else it is 0).
    start_intercept : float
        Starting intercept (e.g. the log-odds of the base rate).
    penalty : array of shape (k,), optional
        Non-negative ``lam_j``: the objective gains ``sum_j lam_j / 2 * (coef_j * sd_j)^2``
        with ``sd_j`` the weighted standard deviation of feature ``j`` (with an intercept;
        the weighted root mean square without one), i.e. a ridge on the coefficient of the
        standardised feature, in units of total weight. ``None``: no penalty. The Newton
        system gains ``diag(lam)``, so the penalised objective is minimised exactly.
    warm_points : int or None
        Above this many rows, start from the fit on this many groups of consecutive rows, and
        above :data:`SMALL_WARM_POINTS` rows (for both fits) from the fit on that many groups
        (module docstring); ``None``: start from zero (and ``start_intercept``).
    with_loss : bool
        False: the caller does not need ``loss``, which is then NaN when the solver did not
        compute it anyway (a run ending in full Newton steps: one pass of logarithms saved).

    Returns
    -------
    coef : ndarray of shape (k,)
    intercept : float
    loss : float
        The objective at the returned point (NaN if not computed, ``with_loss=False``).
    converged : bool
        False when the optimum is at infinity (doubling the coefficients does not raise the
        loss, or some ``|z| > DIVERGED_Z``) or ``max_iter`` ran out.
    """
    cols = _columns(x, len(t))
    t = np.ascontiguousarray(t, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    k = len(cols)
    g_x, shifts, scales = _scale_columns(cols, w, intercept)
    theta = np.zeros(g_x.shape[1])
    if intercept:
        theta[-1] = start_intercept
    lam = np.zeros(g_x.shape[1])
    if penalty is not None:
        lam[:k] = np.asarray(penalty, dtype=np.float64).reshape(k)
        if not (np.isfinite(lam).all() and (lam >= 0.0).all()):
            raise ValueError(f"penalty must be finite and >= 0, got {penalty!r}")
    penalised = bool(lam.any())

    def with_penalty(f, th):
        if penalised:   # a sequential sum over <= 3 terms: the same bits everywhere
            for j in range(k):
                f += 0.5 * lam[j] * th[j] * th[j]
        return f

    if k > 0 and warm_points is not None:
        # warm start: the same fit on at most WARM_POINTS cells of consecutive rows (itself
        # started from SMALL_WARM_POINTS cells), then the full-data Newton from there to the
        # same stopping test (module docstring)
        theta = coarse_to_fine_start(
            g_x, t, w, theta, [int(warm_points), SMALL_WARM_POINTS],
            lambda cx, ct, cw, s: _newton(cx, ct, cw, s, lam, k, max_iter, min_step, ridge,
                                          tol)[0])
    theta, fval, zmax, converged = _newton(g_x, t, w, theta, lam, k, max_iter, min_step,
                                           ridge, tol)
    # at a finite optimum the objective rises along the ray through it (convexity, zero slope
    # at t = 1); if doubling every coefficient does not raise it, the fit stopped on the way to
    # an optimum at infinity (separable or quasi-separable labels) where the gradient
    # underflowed. Only asked once some |z| > SATURATED_Z (p within 2e-9 of 0 or 1): near
    # theta = 0 the rise can be below the loss's rounding
    if fval is None and (with_loss or zmax > SATURATED_Z):
        fval = _penalised_loss(g_x, t, w, theta, lam, k)
    at_infinity = zmax > SATURATED_Z and \
        with_penalty(_loss(g_x, t, w, 2.0 * theta), 2.0 * theta) <= fval
    coef = np.array([theta[j] / scales[j] for j in range(k)])
    b0 = float(theta[-1]) if intercept else 0.0
    for j in range(k):
        b0 -= float(theta[j]) * (shifts[j] / scales[j])
    ok = (converged and not at_infinity and zmax <= DIVERGED_Z
          and bool(np.isfinite(coef).all()) and bool(np.isfinite(b0)))
    return coef, b0, (math.nan if fval is None else float(fval)), ok


def fit_nonnegative(x: np.ndarray, t: np.ndarray, w: np.ndarray, *, intercept: bool,
                    start_intercept: float = 0.0, with_loss: bool = True):
    """:func:`fit_logistic` with every coefficient constrained to be ``>= 0``.

    The exact constrained optimum of the convex objective: it lies in the relative interior of
    one face of the orthant (some coefficients 0, the others positive), where it is the
    unconstrained optimum over the remaining features. So every subset of features is fitted
    (k <= 3: at most 8 fits, fewer when the full fit is already feasible) and the feasible fit
    with the lowest objective wins (ties: fewer features dropped, then earlier columns kept).
    This generalises beta calibration's rule of refitting without a feature whose coefficient
    came out negative (Kull et al. 2017), which can miss the optimum when a refit turns the
    other coefficient negative.

    ``with_loss=False``: the caller does not need the returned loss (NaN when the
    unconstrained fit is feasible and its loss was not computed anyway); the fits with dropped
    features always compute theirs, which are compared.

    Returns
    -------
    coef, intercept, loss, converged
        As :func:`fit_logistic`; ``converged`` is False when any fit tried diverged.
    """
    cols = _columns(x, len(t))
    k = len(cols)
    best = None
    for n_drop in range(k + 1):
        for dropped in itertools.combinations(range(k), n_drop):
            keep = [j for j in range(k) if j not in dropped]
            coef, b0, loss, ok = fit_logistic(tuple(cols[j] for j in keep), t, w,
                                              intercept=intercept,
                                              start_intercept=start_intercept,
                                              with_loss=with_loss or n_drop > 0)
            if not ok:
                return np.zeros(k), b0, loss, False
            if (coef < 0).any():
                continue
            full = np.zeros(k)
            full[keep] = coef
            if best is None or loss < best[2]:
                best = (full, b0, loss)
        if n_drop == 0 and best is not None:
            break   # the unconstrained optimum is feasible
    return best[0], best[1], best[2], True
