"""The floor of probability inputs before their log, measured on the calibration data.

A base model that outputs exact zeros (random forests; naive Bayes, whose tiny probabilities
underflow) claims that a class is impossible; the log of such an input is -inf, and any fixed
floor (1e-300, machine epsilon) is an arbitrary claim about how impossible. The calibration
data say more.

*Numerical zeros*: a probability below :data:`NUMERICAL_ZERO` (``2**-52``, the spacing of
doubles at 1) cannot be carried by a row that sums to 1 -- adding it to the row's largest
entry changes nothing -- so it is a zero as far as the row's arithmetic goes.

*The floor*: pool the (row, class) cells that are numerical zeros and count how often that
class is the true one; with Laplace's rule of succession the pooled rate is
``r = (M + 1) / (N + 2)`` (``N`` the weight of the pooled cells, ``M`` the weight of those that
are the true class; sample weights rescaled to mean 1 per row). While the next distinct input
level ``t`` above the pool is below ``r`` (the model claims less than the pooled cells beneath
it already show), that level joins the pool and ``r`` is recomputed; the floor is the final
``r``. So a zero becomes the probability the data give to a zero, raised as far as needed for
the inputs to stay in order, and inputs at or above the next level never change (the transform
is monotone). Without numerical zeros in the calibration rows the floor is
:data:`NUMERICAL_ZERO` itself: inputs above it are untouched and a zero seen later reads as
``2**-52`` (log -36.04).

Deterministic: with equal weights the pooled sums are integers (exact in any order); with
unequal weights the cells are sorted by (value, true class, weight), so tied cells are
interchangeable and the cumulative sums do not depend on the row order.
"""

from __future__ import annotations

import numpy as np

#: probabilities below this (2**-52) are numerical zeros (module docstring)
NUMERICAL_ZERO = float(np.finfo(np.float64).eps)


def probability_floor(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """The floor for the (n, K) probability rows ``s`` with class indices ``y`` and weights
    ``w`` (rule in the module docstring); in ``[2**-52, 1]``."""
    n, k = s.shape
    values = s.reshape(-1)
    truth = np.zeros(n * k, dtype=bool)
    truth[np.arange(n) * k + y] = True
    if np.all(w == w[0]):
        cell_w = None
        order = np.argsort(values, kind="stable")
    else:
        row_w = w * (np.count_nonzero(w) / float(np.sum(w)))
        cell_w = np.repeat(row_w, k)
        order = np.lexsort((cell_w, truth, values))
    v = values[order]
    t = truth[order]
    zeros = int(np.searchsorted(v, NUMERICAL_ZERO, side="left"))
    if zeros == 0:
        return NUMERICAL_ZERO
    if cell_w is None:
        pooled = np.arange(1, n * k + 1, dtype=np.float64)
        true_pooled = np.cumsum(t, dtype=np.float64)
    else:
        cw = cell_w[order]
        pooled = np.cumsum(cw)
        true_pooled = np.cumsum(np.where(t, cw, 0.0))
    # pool ends: the last numerical zero, then the end of each later group of equal values
    later = np.flatnonzero(np.append(v[zeros + 1:] != v[zeros:-1], True)) + zeros
    ends = np.concatenate([[zeros - 1], later[later >= zeros]])
    rate = (true_pooled[ends] + 1.0) / (pooled[ends] + 2.0)
    next_level = np.append(v[ends[:-1] + 1], np.inf)
    j = int(np.flatnonzero(next_level >= rate)[0])   # the last pool always qualifies
    return float(min(1.0, max(NUMERICAL_ZERO, rate[j])))
