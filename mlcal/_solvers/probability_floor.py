"""The floor of probability inputs before their log, measured on the calibration data.

A base model that outputs exact zeros (random forests, naive Bayes underflowing) claims that a
class is impossible; the log of such an input is -inf, and any fixed floor (1e-300, machine
epsilon) is an arbitrary claim about how impossible. The calibration data can say more: pool
every (row, class) cell whose input probability is at most ``t`` and count how often that class
is the true one. With Laplace's rule of succession the pooled rate is
``r(t) = (M(t) + 1) / (N(t) + 2)`` (``N`` the weight of the pooled cells, ``M`` the weight of
those that are the true class; weights rescaled to mean 1 per row). While ``t < r(t)`` the
claimed probabilities are below what the data can confirm, so they are not distinguishable from
each other; the floor is ``r(t*)`` at the lowest level ``t*`` (a distinct input value) with
``t* >= r(t*)``. Every input below the floor is raised to it: zeros and the tail of tiny
probabilities alike, at a level the data justify. As the floor is at most ``t*``, inputs at or
above ``t*`` never change, and the floor never exceeds a probability the data support: the
transform stays monotone.

Deterministic: with equal weights the pooled sums are integers (exact in any order); with
unequal weights the cells are sorted by (value, true class, weight), so tied cells are
interchangeable and the cumulative sums do not depend on the row order.
"""

from __future__ import annotations

import numpy as np


def probability_floor(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """The floor for the (n, K) probability rows ``s`` with class indices ``y`` and weights
    ``w`` (rule in the module docstring); in ``(0, 1]`` and at least ``1 / (n K + 2)``."""
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
    if cell_w is None:
        pooled = np.arange(1, n * k + 1, dtype=np.float64)
        true_pooled = np.cumsum(t, dtype=np.float64)
    else:
        cw = cell_w[order]
        pooled = np.cumsum(cw)
        true_pooled = np.cumsum(np.where(t, cw, 0.0))
    # the pooled rate at the end of each group of equal values
    ends = np.flatnonzero(np.append(v[1:] != v[:-1], True))
    rate = (true_pooled[ends] + 1.0) / (pooled[ends] + 2.0)
    crossed = np.flatnonzero(v[ends] >= rate)
    return float(min(1.0, rate[crossed[0]] if crossed.size else rate[-1]))
