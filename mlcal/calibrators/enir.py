"""ENIR: ensemble of near-isotonic regression models (Naeini & Cooper, ICDM 2016 / KAIS 2018).

The recipe is the one the authors' code runs (see docs/enir.md): the exact near-isotonic path,
at most 100 of its breakpoints, BIC-weighted averaging without the lambda = 0 model, a per-bin
smoothing step and piecewise-linear prediction between the unique training scores. The average
is folded at fit time into one :class:`~mlcal.maps.LinearMap`.
"""

from __future__ import annotations

import warnings

import numpy as np

from mlcal._solvers.model_average import bic as information_bic
from mlcal._solvers.model_average import relative_likelihood_weights
from mlcal._solvers.neariso import (near_isotonic_path, path_breakpoints, path_model_average,
                                    path_model_scores)
from mlcal._solvers.ties import MIN_SLOPE_GAP, midpoint_cuts
from mlcal.calibrators._params import Boolean, Integer
from mlcal.calibrators.base import (BOUND_SMOOTHING_CONSTRAINTS, MAX_MAP_SIZE_CONSTRAINTS,
                                    BaseCalibrator)
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import DEFAULT_MAX_MAP_SIZE, LinearMap, StepMap

#: path values are rounded to this many decimals before scoring (the authors' R code)
ROUND_DECIMALS = 6


def _linear_map(x: np.ndarray, v: np.ndarray) -> LinearMap:
    """Knots at the unique scores, minus interior knots of flat stretches (exactly redundant)."""
    keep = np.ones(x.size, dtype=bool)
    if x.size > 2:
        keep[1:-1] = (v[1:-1] != v[:-2]) | (v[1:-1] != v[2:])
    return LinearMap(x[keep], v[keep])


def _step_map(x: np.ndarray, v: np.ndarray) -> StepMap:
    """Cuts halfway between adjacent unique scores whose values differ."""
    change = np.flatnonzero(v[1:] != v[:-1])
    cuts = midpoint_cuts(x[change], x[change + 1])  # strictly increasing, never onto a score
    values = np.concatenate((v[:1], v[change + 1]))
    return StepMap(cuts, values)


@register_calibrator("enir")
class ENIR(BaseCalibrator):
    """Ensemble of near-isotonic regression models (ENIR), faithful to the authors' code.

    1. Tied scores are merged into weighted points; the whole near-isotonic path
       ``argmin_p 1/2 sum w (p - ybar)^2 + lam sum (p_i - p_{i+1})_+`` is computed exactly by the
       modified pool-adjacent-violators algorithm (min-heap, O(N log N)). It runs from the
       saturated fit (lam = 0) to the isotonic one.
    2. The models are the solutions at the path's breakpoints: at most ``max_breakpoints``,
       evenly spaced by index when there are more. Each is rounded to 1e-6 and clipped to
       [0, 1]; its bins are the runs of equal values.
    3. Each model is scored by ``BIC = -2 LL + df (log N + log 2 pi)`` with df its number of
       bins and N the total weight. The lam = 0 model and every model with infinite BIC (a bin at
       exactly 0 or 1 holding an opposite label) are dropped; the rest get relative-likelihood
       weights ``exp((BIC_min - BIC) / 2)``, normalised.
    4. With ``smooth_bins`` each bin's value r becomes ``(r n + e (1 - c)) / (n + 1 - c)`` with n
       the bin's weight, e its mean score and c = |mean label - e|.
    5. The weighted average of the models at the unique training scores is the calibration map:
       linear interpolation between them, constant beyond the first and last.

    Scores must lie in [0, 1]; raw scores (e.g. SVM margins) are squashed with the logistic
    sigmoid first, as the paper does (see ``input_transform``).

    Parameters
    ----------
    interpolate : bool, default=True
        ``True`` (the authors' code): a :class:`~mlcal.maps.LinearMap` through the unique
        training scores. ``False`` (the paper's "bins" wording): a :class:`~mlcal.maps.StepMap`
        with cuts halfway between adjacent unique scores. The paper's wording without smoothing
        is ``interpolate=False, smooth_bins=False``.
    smooth_bins : bool, default=True
        Apply the authors' per-bin smoothing (step 4). It is in their code but not in the paper.
    max_breakpoints : int, default=100
        Largest number of path breakpoints (the lam = 0 one included) turned into models.
    max_map_size : int or None, default=10000
        Cap on the size of the fitted map (knots or bins); a larger map is reduced by
        :func:`mlcal.maps.reduce_map` and ``map_reduction_`` records the original size and the
        measured sup-norm error. ``None`` keeps the map as fitted.
    input_transform : {"auto", "identity", "sigmoid"}, default="auto"
        ``"auto"`` applies the logistic sigmoid when a training score lies outside [0, 1]. The
        choice is recorded on ``map_.input_transform`` and replayed at predict time.
    bound_smoothing : float or None, default=None
        ``a > 0`` keeps predictions off exactly 0 and 1: runs of the map at a bound take their
        Beta(a, a) posterior mean, clipped to their neighbours (monotone maps stay monotone; see
        :func:`mlcal.calibrators.base.keep_off_bounds`). ``None`` keeps the map as fitted.

    Attributes
    ----------
    map_ : LinearMap or StepMap
        The folded ensemble.
    lambdas_ : ndarray of shape (M,)
        Path lambdas of the averaged models (increasing; the last is the isotonic fit).
    df_ : ndarray of shape (M,)
        Their number of bins.
    bic_ : ndarray of shape (M,)
        Their BIC.
    weights_ : ndarray of shape (M,)
        Their weights in the average (sum to 1); shows which models carried it.
    n_breakpoints_ : int
        Number of distinct breakpoints of the whole path (lam = 0 included), before thinning.
    map_reduction_ : MapReduction
        Original map size, final size and measured sup-norm error of the size cap.

    Examples
    --------
    >>> import numpy as np
    >>> from mlcal.calibrators.enir import ENIR
    >>> rng = np.random.default_rng(0)
    >>> s = rng.random(500)
    >>> y = (rng.random(500) < s ** 2).astype(int)
    >>> cal = ENIR().fit(s, y)
    >>> bool(np.isclose(cal.weights_.sum(), 1.0))
    True
    """

    requires_unit_interval = True

    map_kinds = ("linear", "step")   # near-isotonic: not monotone
    _parameter_constraints = {"interpolate": [Boolean()], "smooth_bins": [Boolean()],
                              "max_breakpoints": [Integer(2)],
                              "max_map_size": MAX_MAP_SIZE_CONSTRAINTS,
        "bound_smoothing": BOUND_SMOOTHING_CONSTRAINTS}

    def __init__(self, interpolate: bool = True, smooth_bins: bool = True,
                 max_breakpoints: int = 100, input_transform: str = "auto",
                 max_map_size: int | None = DEFAULT_MAX_MAP_SIZE,
                 bound_smoothing: float | None = None):
        self.interpolate = interpolate
        self.smooth_bins = smooth_bins
        self.max_breakpoints = max_breakpoints
        self.input_transform = input_transform
        self.max_map_size = max_map_size
        self.bound_smoothing = bound_smoothing

    def _fit(self, scores, y, w):
        # scores a subnormal distance apart count as tied: the slope between them overflows
        path = near_isotonic_path(scores, y, w, min_gap=MIN_SLOPE_GAP)
        x, merge_lam = path.x, path.merge_lambdas
        lambdas = path_breakpoints(merge_lam, int(self.max_breakpoints))
        df, loglik = path_model_scores(path, lambdas, ROUND_DECIMALS)
        with np.errstate(invalid="ignore"):
            bic = information_bic(loglik, df, float(path.w.sum()))
        keep = np.isfinite(bic)
        if lambdas.size > 1:
            keep[0] = False  # the saturated lambda = 0 model is never used (KAIS footnote 3)
        if not keep.any():
            warnings.warn("ENIR: every path model has an infinite BIC (a bin rounded to 0 or 1 "
                          "holds an opposite label); using the isotonic end of the path alone",
                          RuntimeWarning, stacklevel=3)
            keep[-1] = True
            weights = np.ones(1)
        else:
            weights = relative_likelihood_weights(bic[keep])
        pos = merge_lam[merge_lam > 0]  # sorted, so distinct values are counted by changes
        self.n_breakpoints_ = 1 + int(pos.size > 0) + int(np.count_nonzero(pos[1:] != pos[:-1]))
        self.lambdas_ = lambdas[keep]
        self.df_ = df[keep]
        self.bic_ = bic[keep]
        self.weights_ = weights
        values = path_model_average(path, self.lambdas_, weights, ROUND_DECIMALS,
                                    bool(self.smooth_bins))
        values = np.clip(values, 0.0, 1.0)
        return _linear_map(x, values) if self.interpolate else _step_map(x, values)
