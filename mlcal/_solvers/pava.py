"""Weighted pool-adjacent-violators algorithm (isotonic least squares), compiled with numba."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def pava_blocks(y: np.ndarray, w: np.ndarray):
    """Isotonic (non-decreasing) weighted least-squares fit of ``y`` in the given order.

    A stack of blocks (weighted sum, weight, start) is merged backwards while the last two blocks
    are out of order (or equal, so blocks come out maximal and strictly increasing).

    Returns
    -------
    starts : int64 array of shape (B,)
        Index of the first point of each block.
    values : float64 array of shape (B,)
        Weighted mean of each block; strictly increasing.
    """
    n = y.shape[0]
    wy = np.empty(n)
    ww = np.empty(n)
    starts = np.empty(n, dtype=np.int64)
    nb = 0
    for i in range(n):
        wy[nb] = w[i] * y[i]
        ww[nb] = w[i]
        starts[nb] = i
        nb += 1
        # merge while mean(prev) >= mean(last); cross-multiplied to avoid divisions
        while nb > 1 and wy[nb - 2] * ww[nb - 1] >= wy[nb - 1] * ww[nb - 2]:
            wy[nb - 2] += wy[nb - 1]
            ww[nb - 2] += ww[nb - 1]
            nb -= 1
    values = np.empty(nb)
    for b in range(nb):
        values[b] = wy[b] / ww[b]
    return starts[:nb].copy(), values


def pava(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Fitted isotonic value for every point (expanded from :func:`pava_blocks`)."""
    starts, values = pava_blocks(np.ascontiguousarray(y, dtype=np.float64),
                                 np.ascontiguousarray(w, dtype=np.float64))
    lengths = np.diff(np.append(starts, y.shape[0]))
    return np.repeat(values, lengths)
