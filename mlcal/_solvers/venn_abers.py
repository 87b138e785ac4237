"""Inductive Venn--Abers: the isotonic fit at a test score for every possible test position.

Vovk & Petej (2014): for a test score ``s`` the calibration set is extended by ``(s, 0)`` and by
``(s, 1)``; ``p0(s)`` and ``p1(s)`` are the isotonic (least-squares) fitted values at the test
point. Only the position of ``s`` among the sorted unique calibration scores ``c_0 < ... <
c_{m-1}`` matters, so there are ``m + 1`` gaps (``s`` strictly between ``c_{k-1}`` and ``c_k``),
plus the scores equal to a ``c_k``.

The fit with the test point in gap ``k`` is the pool-adjacent-violators fit of three pieces: the
PAVA blocks of the prefix ``c_0..c_{k-1}``, the test point, and the PAVA blocks of the suffix
``c_k..c_{m-1}`` (PAVA may merge violators in any order). Prefix stacks for every ``k`` come
from one left-to-right PAVA whose blocks are never modified after creation (a merged block is a
new record pointing to the block below it), so the stack of every prefix stays readable; suffix
stacks likewise, from the reversed sequence. Each gap then costs one merge walk outwards from
the test point, which stops at the first blocks that are in order: O(m log m + m B) overall,
B the number of blocks walked.

At a score equal to ``c_k`` the test point is tied with ``c_k``. Then ``p0(c_k)`` equals the gap
value just above (gap ``k + 1``) and ``p1(c_k)`` the gap value just below (gap ``k``): with label
0 placed right after ``c_k``, a fit putting the test point in a block above ``c_k``'s could be
improved by lowering the test point alone, so the fit already ties them (label 1 mirrored).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _prefix_stacks(wy, w):
    """Persistent PAVA stacks of every prefix, left to right.

    Returns block sums, weights, the block below each, and ``top[k]``: the top block of the
    stack of ``c_0..c_{k-1}`` (``-1`` for the empty prefix)."""
    m = w.shape[0]
    bs = np.empty(m)
    bw = np.empty(m)
    below = np.empty(m, dtype=np.int64)
    top = np.empty(m + 1, dtype=np.int64)
    top[0] = -1
    for i in range(m):
        s = wy[i]
        ww = w[i]
        b = top[i]
        while b >= 0 and bs[b] / bw[b] >= s / ww:   # out of order (or equal): pool
            s += bs[b]
            ww += bw[b]
            b = below[b]
        bs[i] = s
        bw[i] = ww
        below[i] = b
        top[i + 1] = i
    return bs, bw, below, top


@njit(cache=True, nogil=True)
def gap_values(ybar, w, label, test_weight):
    """Fitted isotonic value of a test point ``(label, test_weight)`` placed in each of the
    ``m + 1`` gaps of the sorted unique calibration scores (weights ``w``, mean labels
    ``ybar``)."""
    m = w.shape[0]
    wy = ybar * w
    ls, lw, below, top = _prefix_stacks(wy, w)
    # suffix stacks: prefixes of the reversed, negated sequence (a non-decreasing fit from the
    # right is a non-decreasing fit of -y from the left); negation is exact
    rs, rw, above, front = _prefix_stacks(-wy[::-1], w[::-1].copy())
    rs = -rs
    out = np.empty(m + 1)
    for k in range(m + 1):
        s = label * test_weight
        ww = test_weight
        a = top[k]
        b = front[m - k]
        while True:
            if a >= 0 and ls[a] / lw[a] >= s / ww:
                s += ls[a]
                ww += lw[a]
                a = below[a]
            elif b >= 0 and s / ww >= rs[b] / rw[b]:
                s += rs[b]
                ww += rw[b]
                b = above[b]
            else:
                break
        out[k] = s / ww
    return out
