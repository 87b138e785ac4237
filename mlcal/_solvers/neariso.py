"""Near-isotonic regression: the exact solution path in lambda (modified PAV), compiled with numba.

For sorted unique scores with mean labels ``ybar`` and weights ``w`` the problem is (KAIS Eq. 3,
weighted)::

    beta(lam) = argmin_p  1/2 sum_i w_i (p_i - ybar_i)^2 + lam * sum_i (p_i - p_{i+1})_+

Tibshirani, Hoefling & Tibshirani (2011): as ``lam`` grows from 0, adjacent groups of equal value
only ever merge, never split, and a group ``g`` moves linearly with slope
``([left > g] - [g > right]) / W_g``. Its value therefore has the closed form
``(S_g + lam * num_g) / W_g`` with ``S_g = sum w*ybar`` and ``num_g`` in {-1, 0, 1}: ``num_g``
depends only on the order across the group's two outer boundaries, and that order cannot flip
without a collision (which removes the boundary). The path ends at the isotonic (PAVA) fit.

:func:`mpava_merges` finds every merge with a min-heap of collision times and lazy deletion:
O(N log N) time, O(N) memory, only the two boundaries next to a merge are rescheduled (never all
slopes). The merge log ``(lambda, boundary)`` is all that is stored. :func:`path_solution`
rebuilds any solution on the path by replaying the log; :func:`path_model_scores` and
:func:`path_model_average` score and average the models at a list of lambdas in one sequential
pass over the points each, without ever holding a (models x points) matrix.

Numerical choices (docs/enir.md, 'Tolerances'): values or slopes within a relative 1e-8 count
as equal, and equal neighbours fuse at once (all ties of ``ybar`` at lambda = 0, chained merges
later).
A model at a breakpoint lambda_k includes the merges at lambda_k itself; the fused groups have
the same value there, so this only removes 1-ulp differences that could split a bin after
rounding.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_log
from mlcal._solvers.exact import round_half_even_ratio
from mlcal._solvers.ties import merge_close, sort_and_collapse

#: relative tolerance for "equal values" and "equal slopes" (as the authors' NIR.cc; see
#: docs/enir.md, 'Tolerances')
MERGE_RTOL = 1e-8


class NearIsotonicPath(NamedTuple):
    """The whole near-isotonic solution path of one calibration set.

    Attributes
    ----------
    x : ndarray of shape (n,)
        Strictly increasing unique scores.
    ybar : ndarray of shape (n,)
        Weighted mean label at each unique score.
    w : ndarray of shape (n,)
        Total weight at each unique score.
    merge_lambdas : ndarray of shape (m,)
        Non-decreasing lambdas at which two adjacent groups fuse (m <= n - 1).
    merge_boundaries : int32 ndarray of shape (m,)
        For each merge, the index of the first point of the right-hand group, which joins the
        group on its left.
    """

    x: np.ndarray
    ybar: np.ndarray
    w: np.ndarray
    merge_lambdas: np.ndarray
    merge_boundaries: np.ndarray


# --------------------------------------------------------------------------------------------
# 4-ary min-heap of (key, boundary) pairs stored interleaved in one float64 array, so a node's
# four children share a cache line. Only keys are compared (a tie-break on the boundary costs
# branch mispredictions); the pop order among equal keys is still deterministic.
# --------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _sift_up(h, i, key, b):
    while i > 0:
        parent = (i - 1) >> 2
        if key < h[2 * parent]:
            h[2 * i] = h[2 * parent]
            h[2 * i + 1] = h[2 * parent + 1]
            i = parent
        else:
            break
    h[2 * i] = key
    h[2 * i + 1] = b


@njit(cache=True, nogil=True)
def _sift_down(h, i, size, key, b):
    """Place (key, b) at slot i or below in a heap of the given size."""
    while True:
        c = 4 * i + 1
        if c >= size:
            break
        best = c
        best_key = h[2 * c]
        for d in range(c + 1, min(c + 4, size)):
            if h[2 * d] < best_key:
                best = d
                best_key = h[2 * d]
        if best_key < key:
            h[2 * i] = best_key
            h[2 * i + 1] = h[2 * best + 1]
            i = best
        else:
            break
    h[2 * i] = key
    h[2 * i + 1] = b


@njit(cache=True, nogil=True)
def _heapify(h, size):
    for i in range((size - 2) // 4, -1, -1):
        _sift_down(h, i, size, h[2 * i], h[2 * i + 1])


# --------------------------------------------------------------------------------------------
# the path
# --------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _initial_state(ybar, w):
    """Leaf state for replaying the merge log: one group per point, identified by its first
    point ``s``: sum of w*ybar, sum of w, slope numerator, last point, left neighbour."""
    n = ybar.shape[0]
    S = np.empty(n)
    W = np.empty(n)
    num = np.zeros(n, dtype=np.int8)
    end = np.empty(n, dtype=np.int32)
    prev = np.empty(n, dtype=np.int32)
    for i in range(n):
        S[i] = w[i] * ybar[i]
        W[i] = w[i]
        end[i] = i
        prev[i] = i - 1
        v = 0
        if i > 0 and ybar[i - 1] > ybar[i]:
            v += 1
        if i < n - 1 and ybar[i] > ybar[i + 1]:
            v -= 1
        num[i] = v
    return S, W, num, end, prev


# Phase 2 of the solver keeps each group's state in one 64-byte row (array of structs), so a
# merge touches a few cache lines instead of one per field: sum of w*ybar, sum of w, key of the
# boundary's valid event (NaN: none), slope numerator, last group of the run (compact index),
# left neighbour (-2: merged away), first point (original index), key of its newest heap entry.
_S, _W, _EV, _NUM, _END, _PREV, _START, _HEAP = 0, 1, 2, 3, 4, 5, 6, 7


@njit(cache=True, nogil=True, inline="always")
def _value(G, g, lam):
    return (G[g, _S] + lam * G[g, _NUM]) / G[g, _W]


@njit(cache=True, nogil=True, inline="always")
def _equal(G, L, R, lam, rtol):
    vL = _value(G, L, lam)
    vR = _value(G, R, lam)
    return abs(vL - vR) <= rtol * max(abs(vL), abs(vR))


@njit(cache=True, nogil=True)
def _collision(G, L, R, lam, rtol):
    """Lambda >= lam at which groups L (left) and R (right) meet, or NaN if they never do."""
    vL = _value(G, L, lam)
    vR = _value(G, R, lam)
    d = vL - vR
    if abs(d) <= rtol * max(abs(vL), abs(vR)):
        return lam  # equal values fuse at once
    aL = G[L, _NUM] / G[L, _W]
    aR = G[R, _NUM] / G[R, _W]
    da = aR - aL
    if abs(da) <= rtol * max(abs(aL), abs(aR)):
        return np.nan  # parallel: they never meet while both exist
    if (d > 0.0) != (da > 0.0):
        return np.nan  # moving apart
    # converging, so the step is positive and t >= lam even in floating point
    return lam + d / da


@njit(cache=True, nogil=True)
def _merge(G, L, b, ng):
    """Fold group b into its left neighbour L (b's pending heap entries become stale)."""
    G[L, _S] += G[b, _S]
    G[L, _W] += G[b, _W]
    G[L, _NUM] += G[b, _NUM]
    G[L, _END] = G[b, _END]
    G[b, _PREV] = -2.0
    G[b, _EV] = np.nan
    nb = np.int64(G[L, _END]) + 1
    if nb < ng:
        G[nb, _PREV] = L


@njit(cache=True, nogil=True)
def _fuse_equal_neighbours(G, L, lam, rtol, log_lam, log_b, m, ng):
    """Merge group L with neighbours of equal value at ``lam`` (chained merges), logging each.

    Returns the surviving group and the new log length.
    """
    while True:
        if L > 0:
            P = np.int64(G[L, _PREV])
            if _equal(G, P, L, lam, rtol):
                log_lam[m] = lam
                log_b[m] = np.int32(G[L, _START])
                m += 1
                _merge(G, P, L, ng)
                L = P
                continue
        nb = np.int64(G[L, _END]) + 1
        if nb < ng and _equal(G, L, nb, lam, rtol):
            log_lam[m] = lam
            log_b[m] = np.int32(G[nb, _START])
            m += 1
            _merge(G, L, nb, ng)
            continue
        return L, m


@njit(cache=True, nogil=True)
def _fuse_at_zero(ybar, w, rtol, log_lam, log_b):
    """Phase 1: fuse neighbours of equal value at lambda = 0 in one left-to-right stack pass.

    Returns the surviving groups as a compact (ng, 8) state array and the log length.
    """
    n = ybar.shape[0]
    S = np.empty(n)
    W = np.empty(n)
    num = np.empty(n, dtype=np.int8)
    first = np.empty(n, dtype=np.int32)
    ng = 0
    m = 0
    for i in range(n):
        v = 0
        if i > 0 and ybar[i - 1] > ybar[i]:
            v += 1
        if i < n - 1 and ybar[i] > ybar[i + 1]:
            v -= 1
        S[ng] = w[i] * ybar[i]
        W[ng] = w[i]
        num[ng] = v
        first[ng] = i
        ng += 1
        # the top two groups fuse while equal (tolerance is not transitive, so re-check after
        # each fusion: the new mean may match the group below)
        while ng > 1:
            a = ng - 2
            b = ng - 1
            va = S[a] / W[a]
            vb = S[b] / W[b]
            if abs(va - vb) > rtol * max(abs(va), abs(vb)):
                break
            S[a] += S[b]
            W[a] += W[b]
            num[a] += num[b]
            log_lam[m] = 0.0
            log_b[m] = first[b]
            m += 1
            ng -= 1
    G = np.empty((ng, 8))
    for g in range(ng):
        G[g, _S] = S[g]
        G[g, _W] = W[g]
        G[g, _EV] = np.nan
        G[g, _NUM] = num[g]
        G[g, _END] = g
        G[g, _PREV] = g - 1
        G[g, _START] = first[g]
        G[g, _HEAP] = np.nan
    return G, m


@njit(cache=True, nogil=True)
def _drop_root(h, size):
    size -= 1
    if size > 0:
        _sift_down(h, 0, size, h[2 * size], h[2 * size + 1])
    return size


@njit(cache=True, nogil=True)
def _reschedule(G, h, size, L, R, lam, rtol, root_free):
    """New event for the boundary before group R; pushes only if it is earlier than R's entry."""
    t = _collision(G, L, R, lam, rtol)
    G[R, _EV] = t
    if t == t and not G[R, _HEAP] <= t:
        G[R, _HEAP] = t
        if root_free:
            _sift_down(h, 0, size, t, R)
            root_free = False
        else:
            _sift_up(h, size, t, R)
            size += 1
    return root_free, size


@njit(cache=True, nogil=True)
def mpava_merges(ybar: np.ndarray, w: np.ndarray, rtol: float = MERGE_RTOL):
    """All merges of the near-isotonic path, in order of lambda.

    Parameters
    ----------
    ybar, w : float64 arrays of shape (n,)
        Mean labels and (positive) weights of the sorted unique scores.
    rtol : float
        Relative tolerance under which two values (or two slopes) count as equal.

    Returns
    -------
    merge_lambdas : float64 array of shape (m,), non-decreasing
    merge_boundaries : int32 array of shape (m,)
        First point of the right-hand group of each merge, in the order the merges are applied.
    """
    n = ybar.shape[0]
    m_max = max(n - 1, 0)
    log_lam = np.empty(m_max)
    log_b = np.empty(m_max, dtype=np.int32)
    # phase 1: lambda = 0, where equal neighbours fuse at once
    G, m = _fuse_at_zero(ybar, w, rtol, log_lam, log_b)
    ng = G.shape[0]
    # phase 2: collision events in a min-heap with lazy deletion. G[b, _EV] is boundary b's
    # current event and G[b, _HEAP] the key of its newest heap entry. A rescheduled boundary
    # whose event moved later keeps its old (earlier) entry, which is re-keyed when it reaches
    # the root; an entry older than the newest one is stale and dropped when popped.
    cap = 2 * ng + 1  # a valid pop adds at most one entry net
    h = np.empty(2 * cap)
    size = 0
    for b in range(1, ng):
        t = _collision(G, b - 1, b, 0.0, rtol)
        G[b, _EV] = t
        G[b, _HEAP] = t
        if t == t:
            h[2 * size] = t
            h[2 * size + 1] = b
            size += 1
    _heapify(h, size)
    while size > 0:
        t = h[0]
        b = np.int64(h[1])
        if G[b, _PREV] == -2.0 or G[b, _HEAP] != t:
            size = _drop_root(h, size)  # merged away, or superseded by an earlier entry
            continue
        if G[b, _EV] != G[b, _EV]:
            G[b, _HEAP] = np.nan  # the boundary has no event any more
            size = _drop_root(h, size)
            continue
        if G[b, _EV] != t:
            G[b, _HEAP] = G[b, _EV]  # the event moved later: re-key in place
            _sift_down(h, 0, size, G[b, _EV], b)
            continue
        L = np.int64(G[b, _PREV])
        log_lam[m] = t
        log_b[m] = np.int32(G[b, _START])
        m += 1
        _merge(G, L, b, ng)
        L, m = _fuse_equal_neighbours(G, L, t, rtol, log_lam, log_b, m, ng)
        # only the two boundaries next to the new group can change; a new entry takes the
        # consumed root's slot when it is free (one sift instead of a pop and a push)
        root_free = True
        if L > 0:
            root_free, size = _reschedule(G, h, size, np.int64(G[L, _PREV]), L, t, rtol,
                                          root_free)
        nb = np.int64(G[L, _END]) + 1
        if nb < ng:
            root_free, size = _reschedule(G, h, size, L, nb, t, rtol, root_free)
        if root_free:
            size = _drop_root(h, size)
    return log_lam[:m], log_b[:m]  # views: m is close to n, a copy would only cost time


def near_isotonic_path(scores, y, w=None, min_gap: float = 0.0) -> NearIsotonicPath:
    """Sort, collapse tied scores into weighted points, and compute the whole path.

    Parameters
    ----------
    scores, y : array-like of shape (N,)
        Scores and labels (any real targets work; calibration uses 0/1).
    w : array-like of shape (N,), optional
        Non-negative sample weights (default: ones).
    min_gap : float, default=0.0
        Unique scores closer than this also count as tied (merged by
        :func:`mlcal._solvers.ties.merge_close`); ENIR passes ``MIN_SLOPE_GAP`` so the slopes
        of its piecewise-linear map stay finite. 0 merges nothing.

    Returns
    -------
    NearIsotonicPath
    """
    s = np.asarray(scores, dtype=np.float64)
    z = np.asarray(y, dtype=np.float64)
    ww = np.ones_like(s) if w is None else np.asarray(w, dtype=np.float64)
    x, ybar, wsum = merge_close(*sort_and_collapse(s, z, ww), min_gap)
    ybar = np.ascontiguousarray(ybar)
    wsum = np.ascontiguousarray(wsum)
    lam, b = mpava_merges(ybar, wsum, MERGE_RTOL)
    return NearIsotonicPath(x, ybar, wsum, lam, b)


def path_breakpoints(merge_lambdas: np.ndarray, max_breaks: int = 100) -> np.ndarray:
    """The lambdas of the path models, as the authors' ``nearisoGetBreakpoints``.

    0 (the saturated fit) followed by the distinct merge lambdas; when there are more than
    ``max_breaks``, ``max_breaks`` of them evenly spaced by index (first and last kept,
    indices rounded half to even as R's ``round``).
    """
    lam = np.asarray(merge_lambdas, dtype=np.float64)
    if lam.size:
        keep = np.empty(lam.size, dtype=bool)
        keep[0] = True
        keep[1:] = lam[1:] != lam[:-1]
        lam = lam[keep]
    lam = lam[lam > 0.0]
    out = np.concatenate(([0.0], lam))
    if out.size > max_breaks:
        if max_breaks < 2:
            raise ValueError(f"max_breaks must be at least 2, got {max_breaks}")
        # exact integer rounding: a float quotient could round a .5 case either way
        idx = round_half_even_ratio(np.arange(max_breaks, dtype=np.int64) * (out.size - 1),
                                    max_breaks - 1)
        out = out[idx]
    return out


# --------------------------------------------------------------------------------------------
# replaying the merge log
# --------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _replay_state(ybar, w, x):
    S, W, num, end, prev = _initial_state(ybar, w)
    SX = w * x
    return S, W, SX, num, end, prev


@njit(cache=True, nogil=True)
def _apply_merges(S, W, SX, num, end, prev, log_lam, log_b, j, lam):
    """Apply logged merges j, j+1, ... with lambda <= lam (a merge at lam has happened)."""
    n = S.shape[0]
    m = log_lam.shape[0]
    while j < m and log_lam[j] <= lam:
        b = log_b[j]
        L = prev[b]
        S[L] += S[b]
        W[L] += W[b]
        SX[L] += SX[b]
        num[L] += num[b]
        end[L] = end[b]
        nb = end[L] + 1
        if nb < n:
            prev[nb] = L
        j += 1
    return j


@njit(cache=True, nogil=True)
def _path_solution(ybar, w, x, log_lam, log_b, lambdas):
    n = ybar.shape[0]
    S, W, SX, num, end, prev = _replay_state(ybar, w, x)
    out = np.empty((lambdas.shape[0], n))
    j = 0
    for k in range(lambdas.shape[0]):
        lam = lambdas[k]
        j = _apply_merges(S, W, SX, num, end, prev, log_lam, log_b, j, lam)
        s = 0
        while s < n:
            v = (S[s] + lam * num[s]) / W[s]
            for i in range(s, end[s] + 1):
                out[k, i] = v
            s = end[s] + 1
    return out


def _sorted_lambdas(lambdas) -> np.ndarray:
    lam = np.atleast_1d(np.asarray(lambdas, dtype=np.float64))
    if lam.ndim != 1 or not np.isfinite(lam).all() or (lam < 0).any():
        raise ValueError("lambdas must be finite and non-negative")
    if lam.size > 1 and (np.diff(lam) < 0).any():
        raise ValueError("lambdas must be sorted in non-decreasing order")
    return lam


def path_solution(path: NearIsotonicPath, lambdas) -> np.ndarray:
    """Near-isotonic fits at the unique scores for each lambda (shape (len(lambdas), n)).

    Exact for any lambda >= 0 (the path is piecewise linear between merges). Holds a dense
    matrix, so meant for inspection and tests rather than very large n.
    """
    lam = _sorted_lambdas(lambdas)
    return _path_solution(path.ybar, path.w, path.x, path.merge_lambdas, path.merge_boundaries,
                          lam)


# --------------------------------------------------------------------------------------------
# ENIR's per-model statistics (docs/enir.md, 'Scoring' and 'Bin smoothing'), group by group
# --------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def _rounded(v, scale):
    r = np.rint(v * scale) / scale
    if r < 0.0:
        return 0.0
    if r > 1.0:
        return 1.0
    return r


@njit(cache=True, nogil=True, inline="always")
def _run_loglik(r, pos, neg):
    """Bernoulli log-likelihood of a bin with value r; log 0 = -inf as the reference code."""
    ll = 0.0
    if pos > 0.0:
        ll += pos * det_log(r) if r > 0.0 else -np.inf
    if neg > 0.0:
        ll += neg * det_log(1.0 - r) if r < 1.0 else -np.inf
    return ll


@njit(cache=True, nogil=True)
def _merge_lambda_per_boundary(n, log_lam, log_b):
    """mu[b]: lambda at which boundary b (between points b-1 and b) disappears; inf if never."""
    mu = np.full(n, np.inf)
    for j in range(log_lam.shape[0]):
        mu[log_b[j]] = log_lam[j]
    return mu


# The two sweeps below (scores of every model; weighted average of the models) share one loop
# skeleton: boundary b exists at lambda_k iff mu[b] > lambda_k, so with sorted lambdas the
# models that have it are a prefix 0..kb-1, and model k's groups are unions of model k-1's: a
# group closed by model k-1 is carried up and added to model k's running sums. The work is the
# total number of groups over all models, with cache-friendly sequential access. The skeleton
# is written out in both kernels on purpose: one kernel with a mode flag carried the other
# mode's branches and state through the hot inner loop, and factoring the boundary scan or the
# group value into numba helpers (inline="always" or plain) made the ENIR scoring pass 15-35 %
# slower at 1e5 points (measured against the single kernel in one run).
@njit(cache=True, nogil=True)
def _sweep_scores(ybar, w, log_lam, log_b, lambdas, scale):
    """(df, loglik) of every model in one left-to-right pass (see the comment above)."""
    n = ybar.shape[0]
    K = lambdas.shape[0]
    mu = _merge_lambda_per_boundary(n, log_lam, log_b)
    accS = np.zeros(K)
    accW = np.zeros(K)
    gstart = np.zeros(K, dtype=np.int64)
    run_r = np.full(K, -1.0)  # rounded value of the open bin (-1: none yet)
    df = np.zeros(K, dtype=np.int64)
    loglik = np.zeros(K)
    if K == 0:
        return df, loglik
    bS = 0.0
    bW = 0.0
    for i in range(n):
        bS += w[i] * ybar[i]
        bW += w[i]
        b = i + 1
        if b < n:
            mub = mu[b]
            if not mub > lambdas[0]:
                continue  # merged before the first model: points keep accumulating
            kb = 1
            while kb < K and lambdas[kb] < mub:
                kb += 1
            # slope numerator from the original order across the right boundary (module doc)
            rnum = -1 if ybar[i] > ybar[b] else 0
        else:
            kb = K
            rnum = 0
        cS = bS
        cW = bW
        bS = 0.0
        bW = 0.0
        prev_s = -1
        prev_r = -1.0
        prev_ll = 0.0
        for k in range(kb):
            S = accS[k] + cS
            Wg = accW[k] + cW
            s = gstart[k]
            num = rnum
            if s > 0 and ybar[s - 1] > ybar[s]:
                num += 1
            r = _rounded((S + lambdas[k] * num) / Wg, scale)
            # the same group with the same rounded value as in model k-1 (common once groups
            # stop changing): reuse its log-likelihood term instead of two logs
            if s != prev_s or r != prev_r:
                prev_ll = _run_loglik(r, S, Wg - S)
                prev_r = r
            prev_s = s
            loglik[k] += prev_ll
            if r != run_r[k]:
                df[k] += 1
                run_r[k] = r
            gstart[k] = b
            accS[k] = 0.0
            accW[k] = 0.0
            cS = S
            cW = Wg
        if kb < K:
            accS[kb] += cS
            accW[kb] += cW
    return df, loglik


@njit(cache=True, nogil=True)
def _sweep_average(ybar, w, x, log_lam, log_b, lambdas, weights, scale, smooth):
    """Weighted average of the models' (smoothed) bin values at every point, in one
    left-to-right pass (see the comment above); models with zero weight are skipped."""
    n = ybar.shape[0]
    K = 0  # models after the last positive weight need no sweep
    for k in range(lambdas.shape[0]):
        if weights[k] > 0.0:
            K = k + 1
    out = np.zeros(n)
    if K == 0:
        return out
    mu = _merge_lambda_per_boundary(n, log_lam, log_b)
    accS = np.zeros(K)
    accW = np.zeros(K)
    accX = np.zeros(K)
    gstart = np.zeros(K, dtype=np.int64)
    run_r = np.full(K, -1.0)  # rounded value of the open bin (-1: none yet)
    run_pos = np.zeros(K)
    run_tot = np.zeros(K)
    run_sx = np.zeros(K)
    run_start = np.zeros(K, dtype=np.int64)
    bS = 0.0
    bW = 0.0
    bX = 0.0
    for i in range(n):
        bS += w[i] * ybar[i]
        bW += w[i]
        bX += w[i] * x[i]
        b = i + 1
        if b < n:
            mub = mu[b]
            if not mub > lambdas[0]:
                continue  # merged before the first model: points keep accumulating
            kb = 1
            while kb < K and lambdas[kb] < mub:
                kb += 1
            # slope numerator from the original order across the right boundary (module doc)
            rnum = -1 if ybar[i] > ybar[b] else 0
        else:
            kb = K
            rnum = 0
        cS = bS
        cW = bW
        cX = bX
        bS = 0.0
        bW = 0.0
        bX = 0.0
        for k in range(kb):
            S = accS[k] + cS
            Wg = accW[k] + cW
            X = accX[k] + cX
            s = gstart[k]
            if weights[k] > 0.0:
                num = rnum
                if s > 0 and ybar[s - 1] > ybar[s]:
                    num += 1
                r = _rounded((S + lambdas[k] * num) / Wg, scale)
                if r != run_r[k]:
                    if run_r[k] >= 0.0:
                        _fill_bin(out, run_start[k], s, weights[k], run_r[k], run_pos[k],
                                  run_tot[k], run_sx[k], smooth)
                    run_r[k] = r
                    run_start[k] = s
                    run_pos[k] = S
                    run_tot[k] = Wg
                    run_sx[k] = X
                else:
                    run_pos[k] += S
                    run_tot[k] += Wg
                    run_sx[k] += X
            gstart[k] = b
            accS[k] = 0.0
            accW[k] = 0.0
            accX[k] = 0.0
            cS = S
            cW = Wg
            cX = X
        if kb < K:
            accS[kb] += cS
            accW[kb] += cW
            accX[kb] += cX
    for k in range(K):
        if weights[k] > 0.0:
            _fill_bin(out, run_start[k], n, weights[k], run_r[k], run_pos[k], run_tot[k],
                      run_sx[k], smooth)
    return out


@njit(cache=True, nogil=True)
def _fill_bin(out, start, stop, wk, r, pos, tot, sx, smooth):
    """Add wk * (bin value) to out[start:stop], the value smoothed as docs/enir.md, 'Bin
    smoothing', describes."""
    v = r
    if smooth:
        # shrink towards the bin's mean score with pseudo-count 1 - |o - e|
        e = sx / tot
        c = abs(pos / tot - e)
        v = (r * tot + e * (1.0 - c)) / (tot + (1.0 - c))
    wv = wk * v
    for i in range(start, stop):
        out[i] += wv


def path_model_scores(path: NearIsotonicPath, lambdas, decimals: int = 6):
    """Number of bins and log-likelihood of the path model at each lambda.

    Each model's values are rounded to ``decimals`` places and clipped to [0, 1]; its bins are
    the runs of equal rounded values over the unique scores; the log-likelihood is the weighted
    Bernoulli one over all instances, ``-inf`` when a bin at exactly 0 or 1 holds an opposite
    label (docs/enir.md, 'Scoring').

    Returns
    -------
    df : int64 ndarray of shape (K,)
    loglik : float64 ndarray of shape (K,)
    """
    lam = _sorted_lambdas(lambdas)
    return _sweep_scores(path.ybar, path.w, path.merge_lambdas, path.merge_boundaries, lam,
                         float(10 ** int(decimals)))


def path_model_average(path: NearIsotonicPath, lambdas, weights, decimals: int = 6,
                       smooth: bool = True) -> np.ndarray:
    """Weighted average, at the unique scores, of the rounded (optionally smoothed) path models.

    Models with zero weight are skipped. With ``smooth=True`` each bin's value r becomes
    ``(r n + e (1 - c)) / (n + 1 - c)`` with n the bin's weight, e its mean score and
    c = |mean label - e| (the authors' code; docs/enir.md, 'Bin smoothing'); scores must then be
    in [0, 1].
    """
    lam = _sorted_lambdas(lambdas)
    wts = np.ascontiguousarray(weights, dtype=np.float64)
    if wts.shape != lam.shape:
        raise ValueError("weights must have one entry per lambda")
    return _sweep_average(path.ybar, path.w, path.x, path.merge_lambdas, path.merge_boundaries,
                          lam, wts, float(10 ** int(decimals)), bool(smooth))
