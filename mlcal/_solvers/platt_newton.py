"""Newton's method with backtracking for Platt's sigmoid (Lin, Lin & Weng 2007), weighted, on
internally standardised scores.

The per-iteration passes over the data are fused numba loops: one for the objective, one for
gradient and Hessian together, so a fit costs a few O(N) sweeps without temporaries.

Scale: the model ``1/(1 + exp(a f + b))`` is affine in ``f``, so the optimum for ``c f + d`` is
the optimum for ``f`` mapped back exactly. Newton's method is affine invariant in exact
arithmetic, but not its absolute ridge and stopping tolerances: on scores scaled by 1e-12 the
Hessian fell below the ridge and the fit stopped at a near-constant map. The solver therefore
works on ``g = (f - m) / sd`` (weighted mean and standard deviation) and maps the result back.

Stopping: the objective is a sum of N terms, so its rounding error grows with N, and below that
level the backtracking line search cannot tell a good step from a bad one (at 5M rows it
accepted ~1e-8 steps after ~28 halvings, 100 times over). Once the predicted decrease is below a
bound on that rounding error, full Newton steps are taken without a line search (this close to
the optimum they converge quadratically) until the gradient is negligible, at most
``POLISH_STEPS`` times.

Warm start: above :data:`WARM_POINTS` rows the fit first runs on that many groups of consecutive
rows (:func:`group_rows`) and the full-data Newton starts from that optimum, with the same
stopping test: the same optimum in fewer full-data passes (its last bits differ from a cold
start's). Fits of more than :data:`SMALL_WARM_POINTS` rows (the coarse fit, and ``auto``'s fold
fits on 2,000 cells) start in turn from the fit on that many groups.

A step that would go to the line search is taken whole without its objective pass when it
moves no ``z`` by more than :data:`SAFE_STEP_Z` / 2 (bounded by ``|da| max |g| + |db|``), where
the Armijo test provably passes (:data:`mlcal._solvers.logistic_newton.SAFE_STEP_Z`): the same
fit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_exp, det_log, det_log1p

POLISH_STEPS = 4   # full Newton steps once the line search is below rounding; 2-3 suffice
EPS = 2.0 ** -53
#: above this many (collapsed) rows a fit first runs on this many groups of consecutive rows
#: (:func:`group_rows`) and starts the full-data Newton from that optimum
WARM_POINTS = 2000
#: a full Newton step that moves no row's ``z`` by more than this passes the line search's
#: Armijo test (:data:`mlcal._solvers.logistic_newton.SAFE_STEP_Z`, the same argument)
SAFE_STEP_Z = 1.0
#: the warm start's own start: fits of more than this many rows (and at most WARM_POINTS, such
#: as ``auto``'s fold fits on 2,000 cells) first run on this many groups
SMALL_WARM_POINTS = 200


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


def platt_targets(ybar: np.ndarray, wsum: np.ndarray) -> np.ndarray:
    """Platt's (1999) regularised targets for collapsed points (weighted mean label ``ybar``,
    total weight ``wsum``): ``(N+ + 1)/(N+ + 2)`` for positives, ``1/(N- + 2)`` for negatives
    (weighted counts). The cross-entropy is linear in the target, so a tied point's target is
    the same mixture of the two."""
    n_pos = float(np.sum(wsum * ybar))   # not np.dot: BLAS sums in a CPU-specific order
    n_neg = float(np.sum(wsum)) - n_pos
    return ybar * ((n_pos + 1.0) / (n_pos + 2.0)) + (1.0 - ybar) * (1.0 / (n_neg + 2.0))


def scale_by_power_of_two(f: np.ndarray, k: int) -> np.ndarray:
    """``np.ldexp(f, k)`` (the same bits): a product with ``2**k`` where that is a normal
    number (both are the correctly rounded ``f 2**k``), faster than ldexp."""
    return f * (2.0 ** k) if -1000 < k < 1000 else np.ldexp(f, k)


def unit_weights(w: np.ndarray) -> bool:
    """Whether every weight is exactly 1.0 (then ``w * v`` has the bits of ``v``)."""
    return bool((w == 1.0).all())


def standardise(f: np.ndarray, w: np.ndarray,
                out: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """Standardised scores ``g = (f - m) / sd`` with ``m``, ``sd`` the weighted mean and standard
    deviation of ``f`` (``sd = 1`` when all scores are equal); returns ``(g, m / sd, sd)``.

    The scores are first scaled by a power of two (exact) so that ``max |f|`` is about 1: the
    squares of scores near 1e300 would overflow and those near 1e-300 underflow. Plain
    sequential sums (``np.sum``, not BLAS) over the given order: with sorted input the result
    does not depend on the caller's row order. ``out``: an array (or a column view) of
    ``f``'s shape that receives ``g`` (the same division, so the same bits) and is returned.
    """
    top = float(np.max(np.abs(f)))
    e = math.frexp(top)[1] if 0.0 < top < math.inf else 0
    fs = scale_by_power_of_two(f, -e)
    unit = unit_weights(w)   # w * v is v itself: the same sums without the products
    wt = float(np.sum(w))
    m = float(np.sum(fs if unit else w * fs)) / wt
    d = fs - m
    sd = math.sqrt(float(np.sum(d * d if unit else w * d * d)) / wt)   # IEEE sqrt: exact rounding
    if not sd > 0.0:
        sd = math.ldexp(1.0, -e)  # all scores equal: g = 0 and only b is fitted
    return np.divide(d, sd, out=out), m / sd, math.ldexp(sd, e)


def _sigmoid_newton(g, t, w, a, b, max_iter, min_step, ridge, tol):
    """Damped Newton for :func:`fit_sigmoid` on standardised scores ``g`` from ``(a, b)``; the
    iterations run as one compiled loop (:func:`_sigmoid_newton_loop`)."""
    a, b, n_iter = _sigmoid_newton_loop(g, t, w, float(a), float(b), max_iter, min_step, ridge,
                                        tol, float(np.sum(w)), POLISH_STEPS, SAFE_STEP_Z)
    return float(a), float(b), int(n_iter)


@njit(cache=True, nogil=True)
def _sigmoid_newton_loop(g, t, w, a, b, max_iter, min_step, ridge, tol, scale, polish_steps,
                         safe_z):
    """The iterations of :func:`_sigmoid_newton`, compiled: the operations of the former Python
    loop in the same order, Armijo backtracking from the full step by halving it (the first
    step with ``f <= fval + 1e-4 step slope``; none below ``min_step``); the same bits, a zero
    determinant raises ``ZeroDivisionError`` as Python floats did. ``scale`` is the total
    weight (NumPy's pairwise sum)."""
    fval = _objective(g, t, w, a, b)
    # rounding-error bound of a sequential sum of N positive-ish terms, with margin
    rounding = 64.0 * g.size * EPS * (abs(fval) + scale)
    polish = 0
    n_iter = 0
    stale = False   # fval is not the objective at (a, b)
    finite_start = abs(rounding) < math.inf   # (not NaN either)
    gabs = 0.0   # max |g|: a step (da, db) moves no z by more than |da| gabs + |db|
    for i in range(g.shape[0]):
        gabs = max(gabs, abs(g[i]))
    for it in range(1, max_iter + 1):
        n_iter = it
        g0, g1, h11, h21, h22 = _gradient_hessian(g, t, w, a, b)
        gmax = abs(g0)   # Python's max(abs(g0), abs(g1))
        if abs(g1) > gmax:
            gmax = abs(g1)
        if gmax < tol * scale:
            break
        h11 += ridge
        h22 += ridge
        det = h11 * h22 - h21 * h21
        da = -(h22 * g0 - h21 * g1) / det
        db = -(-h21 * g0 + h11 * g1) / det
        slope = g0 * da + g1 * db
        if -slope <= rounding or polish:
            # the line search cannot judge a decrease this small; so close to the optimum the
            # full Newton step converges quadratically
            a, b = a + da, b + db
            polish += 1
            if polish >= polish_steps:
                break
            continue
        if finite_start and abs(da) * gabs + abs(db) <= 0.5 * safe_z:
            # the full step passes the Armijo test (logistic_newton.SAFE_STEP_Z; the bound on
            # the moves of z rounds, hence the half): taken as the line search would take it;
            # the objective at the new point only if a later line search needs it
            a, b = a + da, b + db
            stale = True
            continue
        if stale:   # after such a step
            fval = _objective(g, t, w, a, b)
            stale = False
        step = 1.0
        found = False
        nf = 0.0
        while step >= min_step:
            nf = _objective(g, t, w, a + step * da, b + step * db)
            if nf <= fval + 1e-4 * step * slope:
                found = True
                break
            step /= 2.0
        if not found:
            break  # no further decrease possible at machine precision
        fval = nf
        a, b = a + step * da, b + step * db
    return a, b, n_iter


def fit_sigmoid(f: np.ndarray, t: np.ndarray, w: np.ndarray, *, max_iter: int = 100,
                min_step: float = 1e-10, ridge: float = 1e-12, tol: float = 1e-12,
                warm_points: int | None = WARM_POINTS):
    """Minimise the weighted cross-entropy of ``1/(1+exp(a f + b))`` against targets ``t``.

    Solved for standardised scores ``g = (f - m) / sd`` from a = 0, b = log((N- + 1)/(N+ + 1))
    (weighted counts) as Platt does (above :data:`WARM_POINTS` rows: from the optimum of the
    fit on :func:`group_rows`' groups, reached from that start; above
    :data:`SMALL_WARM_POINTS` rows, that fit or the fit itself from the fit on that many
    groups), then mapped back: ``a = a_g / sd``,
    ``b = b_g - a_g (m / sd)``. Each of the two back-mapping operations rounds once or twice, so
    ``a f + b`` differs from ``a_g g + b_g`` by a few ulps of ``|a_g g| + |b_g| + |a_g m / sd|``
    (negligible unless ``|m| >> sd``, where the scores themselves carry that rounding).

    Stops when the gradient's max-norm (standardised) is below ``tol`` times the total weight,
    after at most ``POLISH_STEPS`` full Newton steps once the predicted decrease is below the
    objective's rounding error, when the line search cannot decrease the objective (step below
    ``min_step``), or after ``max_iter`` steps. ``warm_points=None`` always starts cold.

    Returns
    -------
    a, b : float
    n_iter : int
        Newton iterations on the full data.
    """
    f = np.ascontiguousarray(f, dtype=np.float64)
    t = np.ascontiguousarray(t, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    g, m_over_sd, sd = standardise(f, w)
    n_pos = float(np.sum(w * t))   # not np.dot: BLAS kernels sum in a CPU-specific order
    n_neg = float(np.sum(w)) - n_pos
    a, b = 0.0, float(det_log((n_neg + 1.0) / (n_pos + 1.0)))
    if warm_points is not None:
        # warm start: the same fit on WARM_POINTS groups of consecutive rows (itself started
        # from SMALL_WARM_POINTS groups), then the full-data Newton from there to the same
        # stopping test
        def solve(cx, ct, cw, s):
            wa, wb, _ = _sigmoid_newton(np.ascontiguousarray(cx[:, 0]), ct, cw, s[0], s[1],
                                        max_iter, min_step, ridge, tol)
            return np.array([wa, wb])

        a, b = (float(v) for v in coarse_to_fine_start(
            g[:, None], t, w, np.array([a, b]), [int(warm_points), SMALL_WARM_POINTS], solve))
    a, b, n_iter = _sigmoid_newton(g, t, w, a, b, max_iter, min_step, ridge, tol)
    return a / sd, b - a * m_over_sd, n_iter


def coarse_to_fine_start(x: np.ndarray, t: np.ndarray, w: np.ndarray, start: np.ndarray,
                         levels: list[int], solve) -> np.ndarray:
    """The start for a Newton run on ``(x, t, w)``: the optimum ``solve(cx, ct, cw, s)`` of the
    same fit on the rows merged into ``levels[0]`` groups of consecutive rows
    (:func:`group_rows`), itself started the same way from the next level, when there are more
    rows than that; else ``start`` (also when the coarse optimum is not finite). Shared by the
    sigmoid and the logistic solvers."""
    for i, m in enumerate(levels):
        if t.size > m:
            cx, ct, cw = group_rows(x, t, w, m)
            warm = solve(cx, ct, cw, coarse_to_fine_start(cx, ct, cw, start, levels[i + 1:],
                                                          solve))
            return warm if np.isfinite(warm).all() else start
    return start


@njit(cache=True, nogil=True)
def _group_sums(x, t, w, bounds):
    """Weighted means of features and targets and total weights of the row groups
    ``[bounds[i], bounds[i + 1])`` (sequential sums)."""
    m = bounds.size - 1
    k = x.shape[1]
    gx = np.zeros((m, k))
    gt = np.zeros(m)
    gw = np.zeros(m)
    for i in range(m):
        sw = 0.0
        st = 0.0
        for r in range(bounds[i], bounds[i + 1]):
            sw += w[r]
            st += w[r] * t[r]
            for j in range(k):
                gx[i, j] += w[r] * x[r, j]
        gw[i] = sw
        gt[i] = min(max(st / sw, 0.0), 1.0)
        for j in range(k):
            gx[i, j] /= sw
    return gx, gt, gw


def group_rows(x: np.ndarray, t: np.ndarray, w: np.ndarray, n_groups: int):
    """The rows (in the caller's canonical order) merged into ``n_groups`` groups of
    consecutive rows of (nearly) equal count: weighted mean features and targets, total
    weights. Integer boundaries ``i n // n_groups``: no float decides a group."""
    n = t.size
    bounds = (np.arange(n_groups + 1, dtype=np.int64) * n) // n_groups
    return _group_sums(np.ascontiguousarray(x, dtype=np.float64), t, w, bounds)

