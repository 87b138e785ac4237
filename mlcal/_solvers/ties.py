"""Sorting a calibration set and collapsing tied scores into weighted points."""

from __future__ import annotations

import numpy as np


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
    # stability buys nothing once ties are merged, and the default sort is ~3x faster
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
        wsum = np.add.reduceat(ws, starts)
        wysum = np.add.reduceat(wy, starts)
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
