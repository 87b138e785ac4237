"""Folding a weighted average of clipped piecewise-linear functions into one linear interpolant.

ELiTE averages trend-filtering solutions, each extended linearly beyond the data and clipped to
[0, 1]. Between consecutive points of the union of every member's breakpoints and its 0/1
crossings each clipped member is linear, so the average is exactly a piecewise-linear function
with those knots (and constant beyond the outermost ones): one :class:`~mlcal.maps.LinearMap`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


def _crossings(xk: np.ndarray, vk: np.ndarray) -> np.ndarray:
    """Abscissae where the linearly extrapolated piecewise-linear function through (xk, vk)
    crosses 0 or 1, inside the pieces and on the two extrapolation rays (per level: the pieces'
    crossings in order, then the left and the right ray's), the finite ones."""
    if xk.size < 2:
        return np.empty(0)
    return _crossings_kernel(np.asarray(xk, dtype=np.float64), np.asarray(vk, dtype=np.float64))


@njit(cache=True, nogil=True)
def _crossings_kernel(xk, vk):
    """:func:`_crossings` as one compiled loop (``xk.size >= 2``): the same operations as the
    former array expressions, ``x0 - a * dx / dv`` inside a piece and
    ``x - (v - level) / slope`` on a ray, so the same values in the same order."""
    n = xk.shape[0]
    out = np.empty(2 * (n + 1))
    c = 0
    for level in (0.0, 1.0):
        for i in range(n - 1):
            a = vk[i] - level
            b = vk[i + 1] - level
            if a * b < 0.0:
                out[c] = xk[i] - a * (xk[i + 1] - xk[i]) / (vk[i + 1] - vk[i])
                c += 1
        # rays: left of xk[0] with the first slope, right of xk[-1] with the last
        s0 = (vk[1] - vk[0]) / (xk[1] - xk[0])
        if s0 != 0.0:
            r = xk[0] - (vk[0] - level) / s0
            if r < xk[0]:
                out[c] = r
                c += 1
        s1 = (vk[n - 1] - vk[n - 2]) / (xk[n - 1] - xk[n - 2])
        if s1 != 0.0:
            r = xk[n - 1] - (vk[n - 1] - level) / s1
            if r > xk[n - 1]:
                out[c] = r
                c += 1
    # a ray so flat that its crossing overflows is constant to within |slope| * range there
    keep = 0
    for i in range(c):
        if np.isfinite(out[i]):
            out[keep] = out[i]
            keep += 1
    return out[:keep].copy()


@njit(cache=True, nogil=True)
def _all_crossings(xs, vs, offsets):
    """:func:`_crossings` of every member ``(xs, vs)[offsets[m]:offsets[m + 1]]``, concatenated
    in member order."""
    parts = []
    total = 0
    for m in range(offsets.shape[0] - 1):
        lo = offsets[m]
        hi = offsets[m + 1]
        if hi - lo >= 2:
            c = _crossings_kernel(xs[lo:hi], vs[lo:hi])
            parts.append(c)
            total += c.shape[0]
    out = np.empty(total)
    at = 0
    for c in parts:
        out[at:at + c.shape[0]] = c
        at += c.shape[0]
    return out


def fold_clipped_average(members, weights, min_weight: float = 0.0
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Knots and values of ``sum_m weights[m] * clip(f_m, 0, 1)`` as one linear interpolant.

    ``members`` are ``(xk, vk)`` breakpoint arrays of piecewise-linear functions extrapolated
    linearly beyond their ends. Between consecutive knots of the union of every member's
    breakpoints and 0/1 crossings each clipped member is linear, so the interpolant is exact
    there; beyond the outermost knot every member has saturated (or is flat), so the average is
    constant and the flat extension of :class:`~mlcal.maps.LinearMap` is exact as well: the
    result equals the average on the whole real line, up to rounding (and up to the total weight
    of the members lighter than ``min_weight``, which are left out).
    """
    used = [(xk, vk, wt) for (xk, vk), wt in zip(members, weights) if wt > min_weight]
    offsets = np.zeros(len(used) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([xk.size for xk, _, _ in used])
    xs = np.concatenate([np.asarray(xk, dtype=np.float64) for xk, _, _ in used]
                        or [np.empty(0)])
    vs = np.concatenate([np.asarray(vk, dtype=np.float64) for _, vk, _ in used]
                        or [np.empty(0)])
    # the members' breakpoints and their 0/1 crossings (one compiled call for all members)
    knots = np.unique(np.concatenate((xs, _all_crossings(xs, vs, offsets))))
    wts = np.array([float(wt) for _, _, wt in used])
    values = _clipped_sum(knots, xs, vs, offsets, wts)
    if knots.size > 1:
        # the outermost knots carry the limits at -inf / +inf exactly (a crossing abscissa is
        # rounded, and on a steep ray one ulp can move the member's value off 0 or 1)
        values[0], values[-1] = _ray_limit_sums(xs, vs, offsets, wts)
    return knots, np.clip(values, 0.0, 1.0)


@njit(cache=True, nogil=True)
def _ray_limit_sums(xs, vs, offsets, wts):
    """``sum_m wts[m] * _ray_limit(member m, -1)`` and the same at ``+1``, members added in
    order from 0 (as Python's ``sum`` does): :func:`_ray_limit`'s operations compiled."""
    left = 0.0
    right = 0.0
    for m in range(wts.shape[0]):
        left += wts[m] * _ray_limit_of(xs, vs, offsets[m], offsets[m + 1], -1)
    for m in range(wts.shape[0]):
        right += wts[m] * _ray_limit_of(xs, vs, offsets[m], offsets[m + 1], 1)
    return left, right


@njit(cache=True, nogil=True, inline="always")
def _ray_limit_of(xs, vs, lo, hi, side):
    """:func:`_ray_limit` of the member ``(xs, vs)[lo:hi]``."""
    if hi - lo < 2:
        v = vs[lo]
    else:
        if side < 0:
            rate = -(vs[lo + 1] - vs[lo]) / (xs[lo + 1] - xs[lo])
            v = vs[lo]
            x0 = xs[lo]
        else:
            rate = (vs[hi - 1] - vs[hi - 2]) / (xs[hi - 1] - xs[hi - 2])
            v = vs[hi - 1]
            x0 = xs[hi - 1]
        if rate != 0.0:
            level = 1.0 if rate > 0 else 0.0
            if math.isfinite(x0 + (level - v) / abs(rate)):
                return level
    return 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)


@njit(cache=True, nogil=True)
def _clipped_sum(knots, xs, vs, offsets, wts):
    """``sum_m wts[m] * clip(f_m(knots), 0, 1)``, members added in order, where ``f_m`` is the
    function through ``(xs, vs)[offsets[m]:offsets[m + 1]]`` extended linearly by its end
    slopes (:func:`~mlcal._solvers.trend_filter.piecewise_linear_extrapolate`). One compiled
    merge walk per member instead of ``np.interp`` and masks: the same operations as
    ``np.interp`` (its slope, the value at a breakpoint taken as is, its fallbacks when the
    interpolation is NaN) and as the rays' formula, so the same bits; ``knots`` ascending."""
    n = knots.shape[0]
    values = np.zeros(n)
    for m in range(wts.shape[0]):
        lo = offsets[m]
        hi = offsets[m + 1]
        wt = wts[m]
        if hi - lo == 1:
            for i in range(n):
                v = vs[lo]
                if v < 0.0:
                    v = 0.0
                elif v > 1.0:
                    v = 1.0
                values[i] += wt * v
            continue
        s0 = (vs[lo + 1] - vs[lo]) / (xs[lo + 1] - xs[lo])
        s1 = (vs[hi - 1] - vs[hi - 2]) / (xs[hi - 1] - xs[hi - 2])
        j = lo
        for i in range(n):
            x = knots[i]
            if x < xs[lo]:
                v = vs[lo] + s0 * (x - xs[lo])
            elif x > xs[hi - 1]:
                v = vs[hi - 1] + s1 * (x - xs[hi - 1])
            elif x == xs[hi - 1]:
                v = vs[hi - 1]
            else:
                while xs[j + 1] <= x:   # xs[j] <= x < xs[j + 1]
                    j += 1
                if xs[j] == x:
                    v = vs[j]
                else:
                    slope = (vs[j + 1] - vs[j]) / (xs[j + 1] - xs[j])
                    v = slope * (x - xs[j]) + vs[j]
                    if v != v:
                        v = slope * (x - xs[j + 1]) + vs[j + 1]
                        if v != v and vs[j] == vs[j + 1]:
                            v = vs[j]
            if v < 0.0:   # np.clip(v, 0, 1)
                v = 0.0
            elif v > 1.0:
                v = 1.0
            values[i] += wt * v
    return values


def _ray_limit(xk: np.ndarray, vk: np.ndarray, side: int) -> float:
    """Limit of clip(f, 0, 1) at -inf (side -1) or +inf (side +1), as represented by the fold:
    a ray whose saturation point overflows (slope ~1e-300) keeps its end value."""
    if xk.size < 2:
        return _clip01(vk[0])
    if side < 0:  # slope as seen moving left from the first breakpoint
        rate, v, x0 = -(vk[1] - vk[0]) / (xk[1] - xk[0]), vk[0], xk[0]
    else:
        rate, v, x0 = (vk[-1] - vk[-2]) / (xk[-1] - xk[-2]), vk[-1], xk[-1]
    if rate == 0.0:
        return _clip01(v)
    level = 1.0 if rate > 0 else 0.0
    if math.isfinite(x0 + (level - v) / abs(rate)):
        return level
    return _clip01(v)


def _clip01(v) -> float:
    """``float(np.clip(v, 0, 1))`` of a finite scalar (without NumPy's per-call cost)."""
    v = float(v)
    return 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)
