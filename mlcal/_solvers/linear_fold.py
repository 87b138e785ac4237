"""Folding a weighted average of clipped piecewise-linear functions into one linear interpolant.

ELiTE averages trend-filtering solutions, each extended linearly beyond the data and clipped to
[0, 1]. Between consecutive points of the union of every member's breakpoints and its 0/1
crossings each clipped member is linear, so the average is exactly a piecewise-linear function
with those knots (and constant beyond the outermost ones): one :class:`~mlcal.maps.LinearMap`.
"""

from __future__ import annotations

import numpy as np

from mlcal._solvers.trend_filter import piecewise_linear_extrapolate


def _crossings(xk: np.ndarray, vk: np.ndarray) -> np.ndarray:
    """Abscissae where the linearly extrapolated piecewise-linear function through (xk, vk)
    crosses 0 or 1, inside the pieces and on the two extrapolation rays."""
    if xk.size < 2:
        return np.empty(0)
    out = []
    dx = np.diff(xk)
    dv = np.diff(vk)
    for level in (0.0, 1.0):
        a = vk[:-1] - level
        b = vk[1:] - level
        inside = a * b < 0.0
        out.append(xk[:-1][inside] - a[inside] * dx[inside] / dv[inside])
        # rays: left of xk[0] with the first slope, right of xk[-1] with the last
        s0 = dv[0] / dx[0]
        if s0 != 0.0:
            t = xk[0] - (vk[0] - level) / s0
            if t < xk[0]:
                out.append(np.array([t]))
        s1 = dv[-1] / dx[-1]
        if s1 != 0.0:
            t = xk[-1] - (vk[-1] - level) / s1
            if t > xk[-1]:
                out.append(np.array([t]))
    c = np.concatenate(out)
    # a ray so flat that its crossing overflows is constant to within |slope| * range there
    return c[np.isfinite(c)]


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
    pts = [xk for xk, _, _ in used] + [_crossings(xk, vk) for xk, vk, _ in used]
    knots = np.unique(np.concatenate(pts))
    values = np.zeros(knots.size)
    for xk, vk, wt in used:
        values += wt * np.clip(piecewise_linear_extrapolate(xk, vk, knots), 0.0, 1.0)
    if knots.size > 1:
        # the outermost knots carry the limits at -inf / +inf exactly (a crossing abscissa is
        # rounded, and on a steep ray one ulp can move the member's value off 0 or 1)
        values[0] = sum(wt * _ray_limit(xk, vk, -1) for xk, vk, wt in used)
        values[-1] = sum(wt * _ray_limit(xk, vk, +1) for xk, vk, wt in used)
    return knots, np.clip(values, 0.0, 1.0)


def _ray_limit(xk: np.ndarray, vk: np.ndarray, side: int) -> float:
    """Limit of clip(f, 0, 1) at -inf (side -1) or +inf (side +1), as represented by the fold:
    a ray whose saturation point overflows (slope ~1e-300) keeps its end value."""
    if xk.size < 2:
        return float(np.clip(vk[0], 0.0, 1.0))
    if side < 0:  # slope as seen moving left from the first breakpoint
        rate, v, x0 = -(vk[1] - vk[0]) / (xk[1] - xk[0]), vk[0], xk[0]
    else:
        rate, v, x0 = (vk[-1] - vk[-2]) / (xk[-1] - xk[-2]), vk[-1], xk[-1]
    if rate == 0.0:
        return float(np.clip(v, 0.0, 1.0))
    level = 1.0 if rate > 0 else 0.0
    if np.isfinite(x0 + (level - v) / abs(rate)):
        return level
    return float(np.clip(v, 0.0, 1.0))
