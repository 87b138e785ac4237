"""The floor of probability inputs before their log, measured on the calibration data.

A base model that outputs exact zeros (random forests; naive Bayes, whose tiny probabilities
underflow) claims that a class is impossible; the log of such an input is -inf, and any fixed
floor (1e-300, machine epsilon) is an arbitrary claim about how impossible. The calibration
data say more.

*Numerical zeros*: a probability below :data:`NUMERICAL_ZERO` (``2**-52``, the spacing of
doubles at 1) cannot be carried by a row that sums to 1 -- adding it to the row's largest
entry changes nothing -- so it is a zero as far as the row's arithmetic goes.

*The upper end* (:func:`probability_floor`): pool the (row, class) cells that are numerical
zeros and count how often that class is the true one; with Laplace's rule of succession the
pooled rate is ``r = (M + 1) / (N + 2)`` (``N`` the weight of the pooled cells, ``M`` the
weight of those that are the true class; sample weights rescaled to mean 1 per row). While the
next distinct input level ``t`` above the pool is below ``r`` (the model claims less than the
pooled cells beneath it already show), that level joins the pool and ``r`` is recomputed; the
final ``r`` is the most a zero can be worth: the probability the data give to a zero, raised as
far as needed for the inputs to stay in order.

*The floor* (:func:`likelihood_floor`, what the scaling calibrators use): between ``2**-52``
(the inputs as given, only numerical zeros raised) and that upper end, the candidate (of
:data:`FLOOR_GRID_SIZE`, log-spaced) under which temperature scaling explains the calibration
labels best (highest weighted likelihood). Naive Bayes, whose tiny probabilities still rank
the classes, keeps them (floor ``2**-52``); a random forest, whose zeros are true now and then,
gets the zeros' rate. Flooring is ``max(p, floor)``: monotone, and inputs above the floor never
change. Without numerical zeros in the calibration rows the floor is :data:`NUMERICAL_ZERO`:
no calibration input changes and a zero seen later reads as ``2**-52`` (log -36.04).

Deterministic: with equal weights the pooled sums are integers (exact in any order); with
unequal weights the cells are sorted by (value, true class, weight), so tied cells are
interchangeable and the cumulative sums do not depend on the row order.
"""

from __future__ import annotations

import numpy as np

from mlcal._solvers.convex_newton import newton
from mlcal._solvers.detmath import det_exp, det_log
from mlcal._solvers.softmax_affine import canonical_order, floored_log
from mlcal._solvers.softmax_derivatives import temperature_derivatives

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


#: candidate floors of :func:`likelihood_floor`, log-spaced from 2**-52 to the pooled rate
FLOOR_GRID_SIZE = 17
#: rows used to choose the floor: above this, every k-th row of the canonical order
FLOOR_MAX_ROWS = 4096


def floor_grid(upper: float) -> np.ndarray:
    """The :data:`FLOOR_GRID_SIZE` candidates, log-spaced from ``2**-52`` to ``upper`` (detmath's
    exp and log: the same values on every CPU; the ends exact)."""
    logs = np.linspace(det_log(NUMERICAL_ZERO), det_log(upper), FLOOR_GRID_SIZE)
    grid = np.array([det_exp(float(v)) for v in logs])
    grid[0], grid[-1] = NUMERICAL_ZERO, upper
    return grid


def likelihood_floor(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """The floor, among :data:`FLOOR_GRID_SIZE` log-spaced candidates from ``2**-52`` to
    :func:`probability_floor` (the pooled Laplace rate of the numerical zeros), under which
    temperature scaling on ``log(max(s, floor))`` has the highest weighted likelihood of the
    calibration labels. Without numerical zeros it is ``2**-52``.

    One parameter chosen among 17: above :data:`FLOOR_MAX_ROWS` rows it is chosen on every
    ``ceil(n / FLOOR_MAX_ROWS)``-th row of the canonical row order (a deterministic subsample,
    independent of the caller's row order), so that the choice costs a fixed amount of work."""
    if not np.any(s < NUMERICAL_ZERO):
        return NUMERICAL_ZERO
    order = canonical_order(s, y, w)   # a fixed row order: sums independent of the caller's
    step = -(-s.shape[0] // FLOOR_MAX_ROWS)
    order = order[::step]
    s, y, w = (np.ascontiguousarray(a[order]) for a in (s, y, w))
    upper = probability_floor(s, y, w)
    if upper <= NUMERICAL_ZERO:
        return NUMERICAL_ZERO
    grid = floor_grid(upper)
    best, best_nll = upper, np.inf
    theta = np.array([1.0])
    for floor in grid:
        x = floored_log(s, float(floor))

        def evaluate(theta, hessian):
            f, d1, d2 = temperature_derivatives(x, y, w, float(theta[0]))
            return f, np.array([d1]), np.array([[d2]])

        # warm start from the previous candidate's optimum (neighbouring floors, close optima)
        theta, _, _ = newton(evaluate, theta, max_iter=500)
        nll = float(evaluate(theta, False)[0])
        if nll < best_nll:
            best, best_nll = float(floor), nll
    return best
