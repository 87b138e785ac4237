"""Sorting a calibration set and collapsing tied scores into weighted points."""

from __future__ import annotations

import numpy as np
from numba import njit

_MAX_PARTIALS = 64   # an exact double sum needs at most ~40 non-overlapping partials


@njit(cache=True, nogil=True)
def _exact_sum(a, lo, hi, partials):
    """Correctly rounded sum of ``a[lo:hi]`` (Shewchuk's non-overlapping partials, then a
    half-way-aware final rounding). The result does not depend on the order of the terms."""
    n = 0
    for i in range(lo, hi):
        x = a[i]
        j = 0
        for k in range(n):
            y = partials[k]
            if abs(x) < abs(y):
                x, y = y, x
            h = x + y
            t = y - (h - x)               # exact error of x + y (|x| >= |y|)
            if t != 0.0:
                partials[j] = t
                j += 1
            x = h
        partials[j] = x
        n = j + 1
    if n == 0:
        return 0.0
    k = n - 1
    h = partials[k]
    t = 0.0
    while k > 0:                           # add from the largest partial down, stop when inexact
        x = h
        y = partials[k - 1]
        k -= 1
        h = x + y
        t = y - (h - x)
        if t != 0.0:
            break
    # round half-way cases correctly: the remaining partials decide the direction
    if k > 0 and ((t < 0.0 and partials[k - 1] < 0.0) or (t > 0.0 and partials[k - 1] > 0.0)):
        y = t * 2.0
        x = h + y
        if y == x - h:
            h = x
    return h


@njit(cache=True, nogil=True)
def _sum_if_exact(a, lo, hi):
    """``(s, True)`` when adding ``a[lo:hi]`` (``hi - lo >= 2``) in order rounds at no step
    (every step's TwoSum error is 0: integer counts, say), so that ``s`` is the exact sum
    itself, i.e. the correctly rounded one, and it is finite and nonzero; else ``(s, False)``
    (the caller runs :func:`_exact_sum`, which also settles the sign of a zero sum)."""
    s = a[lo]
    for i in range(lo + 1, hi):
        v = a[i]
        t = s + v
        bv = t - s
        if (s - (t - bv)) + (v - bv) != 0.0:   # Knuth's TwoSum error (NaN past overflow)
            return s, False
        s = t
    return s, s != 0.0 and s - s == 0.0


@njit(cache=True, nogil=True)
def exact_group_sums(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Correctly rounded sum of each group ``values[starts[g]:starts[g+1]]`` (the last group runs
    to the end). Unlike ``np.add.reduceat`` the result is independent of the order of the values
    inside a group, so a calibration set gives the same sums whatever its row order, and whatever
    order a CPU's sort leaves tied rows in."""
    g_count = starts.shape[0]
    out = np.empty(g_count)
    partials = np.empty(_MAX_PARTIALS)
    for g in range(g_count):
        hi = starts[g + 1] if g + 1 < g_count else values.shape[0]
        lo = starts[g]
        if hi - lo == 1:
            out[g] = values[lo]
        else:
            # a sum that is exact as it goes is the correctly rounded one (unique), so the
            # fast path gives the same bits as the partials
            # (an empty group, hi == lo, takes the partials' 0.0)
            s, exact = _sum_if_exact(values, lo, hi) if hi - lo > 1 else (0.0, False)
            out[g] = s if exact else _exact_sum(values, lo, hi, partials)
    return out


@njit(cache=True, nogil=True)
def _sort_tied_runs(order, s):
    """Sort ``order`` ascending within every run of equal ``s`` (``s`` sorted, ``order`` its
    permutation), in place."""
    n = s.shape[0]
    lo = 0
    while lo < n:
        hi = lo + 1
        while hi < n and s[hi] == s[lo]:
            hi += 1
        if hi - lo > 1:
            order[lo:hi] = np.sort(order[lo:hi])
        lo = hi


def stable_argsort(scores: np.ndarray) -> np.ndarray:
    """``np.argsort(scores, kind="stable")``, the same permutation, faster.

    A stable sort orders the rows by (score, original index). NumPy's default sort (several
    times faster than its stable one on float64) gives the scores in order but leaves tied rows
    in an order of its own (which can depend on the CPU's sort kernel); sorting the indices
    within each run of equal scores restores the stable permutation. ``scores`` must be finite
    (a NaN equals nothing, so its run would not be put in order); ``-0.0`` and ``0.0`` are one
    run, as for the stable sort.
    """
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    order = np.argsort(scores)
    s = scores[order]
    if s.size > 1 and bool((s[1:] == s[:-1]).any()):
        _sort_tied_runs(order, s)
    return order


def sort_and_collapse(scores: np.ndarray, y: np.ndarray, w: np.ndarray):
    """Sort by score and merge exactly equal scores into one weighted point.

    Points with zero total weight are dropped (they carry no information).

    Returns
    -------
    x : ndarray
        Strictly increasing unique scores.
    ybar : ndarray
        Weighted mean label at each unique score.
    wsum : ndarray
        Total weight at each unique score (> 0).
    """
    # stability buys nothing once ties are merged (their sums are exact, so the order in which a
    # CPU's sort leaves tied rows cannot matter), and the default sort is ~3x faster
    if scores.size > 1 and bool((scores[1:] >= scores[:-1]).all()) \
            and not bool((scores == 0.0).any()):
        # already sorted (auto sorts its rows once): the sort would only permute tied rows,
        # whose sums are exact. (With a zero the sort picks which of 0.0 and -0.0 stands for
        # their run, so that case takes the sort as before.)
        s, ws, wy = scores.copy(), w.copy(), w * y   # (copies: never the caller's arrays)
    else:
        order = np.argsort(scores)
        s = scores[order]
        ws = w[order]
        wy = ws * y[order]
    if s.size > 1:
        starts = np.concatenate(([0], np.flatnonzero(s[1:] != s[:-1]) + 1))
    else:
        starts = np.zeros(1, dtype=np.intp)
    if starts.size == s.size:
        x, wsum, wysum = s, ws, wy
    else:
        x = s[starts]
        wsum = exact_group_sums(ws, starts)
        wysum = exact_group_sums(wy, starts)
    keep = wsum > 0
    if not keep.all():
        x, wsum, wysum = x[keep], wsum[keep], wysum[keep]
    return x, wysum / wsum, wsum


def midpoint_cuts(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Step-map cuts halfway between ``lower[i] < upper[i]`` (the last score of one bin and the
    first of the next).

    Guarantees ``lower < cut <= upper``: the midpoint of two adjacent doubles may round down onto
    ``lower``, and then ``upper`` itself is used, so with ``side="right"`` every training score
    stays in its own bin.
    """
    mid = 0.5 * (lower + upper)
    return np.where(mid > lower, mid, upper)


#: Gaps below the smallest normal double are merged before building a LinearMap: a slope
#: ``dv / gap`` with ``|dv| <= 1`` stays finite (below 2^1022) exactly when ``gap >= 2^-1022``.
MIN_SLOPE_GAP = 2.2250738585072014e-308


def merge_close(x: np.ndarray, y: np.ndarray, w: np.ndarray, min_gap: float):
    """Merge runs of sorted points whose consecutive gaps are below ``min_gap``.

    Each run becomes one point at its weighted mean abscissa (clamped into the run's range) with
    the weighted mean target and the summed weight (sums exact, so independent of row order).
    Used where a piecewise-linear map needs representable slopes between its knots.
    """
    if x.size < 2 or min_gap <= 0:
        return x, y, w
    close = np.diff(x) < min_gap
    if not close.any():
        return x, y, w
    starts = np.concatenate(([0], np.flatnonzero(~close) + 1))
    ends = np.append(starts[1:], x.size) - 1
    wsum = exact_group_sums(w, starts)
    xm = np.clip(exact_group_sums(w * x, starts) / wsum, x[starts], x[ends])
    return xm, exact_group_sums(w * y, starts) / wsum, wsum
