"""Fused passes over the rows for the segmented Newton solvers
(:mod:`mlcal.calibrators.segment_shrinkage`).

Each kernel computes, in one loop over the rows, what the numpy formulation computes with a
``det_expit_array`` and several ``np.bincount`` passes over temporary arrays, with the same
operations in the same order, so the results are the same bits:

* the per-row values are the same IEEE-754 expressions (``a * l + d``, ``w * (y - p)``,
  ``w * (p * (1 - p))``, ``(q * l) * l``, ...), and detmath's scalar functions give the
  values of its array functions;
* every sum is sequential in row order starting from 0, which is what ``np.bincount`` does
  for each bin (and the single-bin sum ``_total`` of segment_shrinkage).

Compiled without fast-math, so LLVM neither re-associates nor contracts to FMA (as detmath;
tests/test_segment_kernels.py checks the host assembly): the same bits on every x86-64 CPU.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_exp, det_expit, det_log1p


@njit(cache=True, nogil=True)
def offset_sums(logits: np.ndarray, d: np.ndarray, codes: np.ndarray, w: np.ndarray,
                y: np.ndarray, n_segments: int) -> tuple[np.ndarray, np.ndarray]:
    """Per segment ``sum w (y - p)`` and ``sum w p (1 - p)`` with ``p = expit(l + d[code])``
    (``np.bincount`` of those products: the same bits)."""
    g = np.zeros(n_segments)
    h = np.zeros(n_segments)
    for i in range(logits.shape[0]):
        c = codes[i]
        p = det_expit(logits[i] + d[c])
        g[c] += w[i] * (y[i] - p)
        h[c] += w[i] * (p * (1.0 - p))
    return g, h


@njit(cache=True, nogil=True)
def slope_sums(a: float, logits: np.ndarray, d: np.ndarray, codes: np.ndarray,
               w: np.ndarray, y: np.ndarray, n_segments: int):
    """The gradient and Hessian sums of ``common_slope_fit`` at ``(a, d)``: with ``p =
    expit(a l + d[code])``, ``r = w (y - p)`` and ``q = w p (1 - p)``, the totals ``sum r l``
    and ``sum q l l`` and per segment ``sum r``, ``sum q l`` and ``sum q`` (sequential: the
    bits of ``_total`` and ``np.bincount``)."""
    g_a = 0.0
    h_aa = 0.0
    g_d = np.zeros(n_segments)
    h_ad = np.zeros(n_segments)
    h_dd = np.zeros(n_segments)
    for i in range(logits.shape[0]):
        c = codes[i]
        li = logits[i]
        p = det_expit(a * li + d[c])
        r = w[i] * (y[i] - p)
        q = w[i] * (p * (1.0 - p))
        ql = q * li
        g_a += r * li
        h_aa += ql * li
        g_d[c] += r
        h_ad[c] += ql
        h_dd[c] += q
    return g_a, g_d, h_aa, h_ad, h_dd


@njit(cache=True, nogil=True)
def loglik_sum(a: float, logits: np.ndarray, d: np.ndarray, codes: np.ndarray,
               w: np.ndarray, y: np.ndarray) -> float:
    """``sum w [y z - log(1 + e^z)]`` with ``z = a l + d[code]`` and ``log(1 + e^z) =
    max(z, 0) + log1p(e^-|z|)`` (detmath; sequential), the bits of
    ``logistic_loglik(a * l + d[codes], y, w)``."""
    total = 0.0
    for i in range(logits.shape[0]):
        z = a * logits[i] + d[codes[i]]
        soft = (z if z > 0.0 else 0.0) + det_log1p(det_exp(-abs(z)))
        total += w[i] * (y[i] * z - soft)
    return total
