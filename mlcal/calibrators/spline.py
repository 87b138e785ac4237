"""Monotone smoothing-spline calibration: a penalised monotone linear spline whose smoothing is
chosen by cross-validated log loss. Derivation and conventions: docs/spline.md."""

from __future__ import annotations

import numpy as np

from mlcal._solvers.pspline import gram_sums, grid_held_out_losses, monotone_qp, penalised
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators._params import Integer, IsNone, ListOf, Real
from mlcal.calibrators.base import BOUND_SMOOTHING_CONSTRAINTS, BaseCalibrator
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import LinearMap

#: the default penalty grid: 10^-6, 10^-5.5, ..., 10^2
DEFAULT_PENALTIES = tuple(float(10.0 ** (e / 2)) for e in range(-12, 5))
#: held-out probabilities are clipped to [eps, 1 - eps] in the cross-validated log loss
CV_CLIP = 1e-6


def spline_knots(x: np.ndarray, n_knots: int, n_folds: int) -> np.ndarray:
    """Knots at evenly spaced ranks of the sorted unique scores ``x`` (first and last included),
    at most one every ``n_folds`` ranks, so every knot interval keeps training points in every
    cross-validation split."""
    m = x.size
    k = max(1, min(n_knots - 1, (m - 1) // max(n_folds, 1)))
    ranks = (np.arange(k + 1) * (m - 1)) // k     # exact integer quantile ranks
    return x[np.unique(ranks)]


def fit_theta(x, ybar, w, knots, use, lam) -> np.ndarray:
    """Knot values of the monotone penalised least-squares spline on the points ``use``."""
    a, b, _ = gram_sums(x, ybar, w, knots, use)
    start = float(np.sum(b)) if knots.size else 0.0   # sum of b = weighted mean label
    return monotone_qp(penalised(a, lam), b, start)


@register_calibrator("spline")
class MonotoneSpline(BaseCalibrator):
    """Monotone penalised linear spline, smoothing chosen by K-fold cross-validated log loss.

    The map is piecewise linear in the score with knots at evenly spaced ranks of the distinct
    training scores, so it is exactly a :class:`~mlcal.maps.LinearMap`. Its knot values minimise
    the weighted squared error plus ``penalty`` times the sum of squared second differences of
    the knot values (a P-spline penalty, Eilers & Marx 1996), under the constraint that they are
    non-decreasing; the fit is exact (active-set quadratic programming). The penalty is the
    grid value with the smallest ``cv``-fold cross-validated log loss (folds deal the sorted
    distinct scores in turn, so they do not depend on row order); knot values are finally
    clipped to [0, 1].

    Parameters
    ----------
    n_knots : int >= 2, default=20
        Number of knots (fewer when there are few distinct scores).
    penalties : list of float > 0 or None, default=None
        The penalty grid; ``None`` is ``10^-6, 10^-5.5, ..., 10^2``.
    cv : int >= 2, default=5
        Number of cross-validation folds.
    bound_smoothing : float or None, default=None
        ``a > 0`` keeps predictions off exactly 0 and 1 (knot values clipped to a bound take
        their Beta(a, a) posterior mean, clipped to their neighbours; see
        :func:`mlcal.calibrators.base.keep_off_bounds`). ``None`` keeps the map as fitted.

    Attributes
    ----------
    map_ : LinearMap
        The fitted map (flat outside the training score range).
    penalty_ : float
        The chosen penalty.
    cv_log_loss_ : ndarray
        Cross-validated log loss (per unit weight) for each penalty of the grid.
    coef_ : ndarray
        The optimal knot values before clipping to [0, 1] (a small penalty lets the spline
        extrapolate a trend slightly past 0 or 1 at the end knots).

    Examples
    --------
    >>> import numpy as np
    >>> from mlcal import MonotoneSpline
    >>> rng = np.random.default_rng(0)
    >>> s = rng.random(500)
    >>> y = (rng.random(500) < s ** 2).astype(int)
    >>> p = MonotoneSpline().fit(s, y).predict([0.1, 0.5, 0.9])
    >>> bool(p[0] <= p[1] <= p[2])
    True
    """

    map_kinds = ("linear",)
    monotone = True   # cumulative sums of increments >= 0
    _parameter_constraints = {"n_knots": [Integer(2)],
                              "penalties": [IsNone(), ListOf(Real(0.0, closed="neither"))],
                              "cv": [Integer(2)],
                              "bound_smoothing": BOUND_SMOOTHING_CONSTRAINTS}

    def __init__(self, n_knots: int = 20, penalties: list[float] | None = None, cv: int = 5,
                 bound_smoothing: float | None = None):
        self.n_knots = n_knots
        self.penalties = penalties
        self.cv = cv
        self.bound_smoothing = bound_smoothing

    def _grid(self) -> np.ndarray:
        grid = DEFAULT_PENALTIES if self.penalties is None else self.penalties
        return np.asarray([float(v) for v in grid], dtype=np.float64)

    def _fit(self, scores, y, w):
        return self._fit_points(*sort_and_collapse(scores, y, w), scores)

    def _fit_points(self, x, ybar, wsum, scores):
        grid = self._grid()
        if x.size == 1:   # one distinct score: the weighted mean label
            self.penalty_, self.cv_log_loss_ = float(grid[0]), np.full(grid.size, np.nan)
            self.coef_ = ybar.copy()
            return LinearMap(x, np.clip(ybar, 0.0, 1.0))
        knots = spline_knots(x, self.n_knots, self.cv)
        wn = wsum / wsum.max()   # counts only relatively; keeps the loss sums in range
        fold = np.arange(x.size) % self.cv
        losses = np.zeros(grid.size)
        if knots.size > 2 and x.size >= 2 * self.cv:   # otherwise the penalty has no effect
            for f in range(self.cv):
                train, held = fold != f, fold == f
                a, b, _ = gram_sums(x, ybar, wn, knots, train)
                losses += grid_held_out_losses(a, b, float(np.sum(b)), grid, x, ybar, wn,
                                               held, knots, CV_CLIP)
            losses /= float(np.sum(wn))
        # smallest loss; among equal losses the largest penalty (the smoothest fit)
        ties = np.flatnonzero(losses == losses.min())
        best = int(ties[np.argmax(grid[ties])])
        self.penalty_ = float(grid[best])
        self.cv_log_loss_ = losses
        theta = fit_theta(x, ybar, wn, knots, np.ones(x.size, dtype=np.bool_), self.penalty_)
        self.coef_ = theta
        return LinearMap(knots, np.clip(theta, 0.0, 1.0))
