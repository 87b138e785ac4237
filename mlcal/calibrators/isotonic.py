"""Isotonic regression calibration (Zadrozny & Elkan 2002) by weighted PAVA."""

from __future__ import annotations

import numpy as np

from mlcal._solvers.pava import pava_blocks
from mlcal._solvers.ties import MIN_SLOPE_GAP, merge_close, midpoint_cuts, sort_and_collapse
from mlcal.calibrators._params import Boolean
from mlcal.calibrators.base import (BOUND_SMOOTHING_CONSTRAINTS, MAX_MAP_SIZE_CONSTRAINTS,
                                    BaseCalibrator)
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import DEFAULT_MAX_MAP_SIZE, LinearMap, StepMap


@register_calibrator("isotonic")
class Isotonic(BaseCalibrator):
    """Non-decreasing least-squares calibration map (pool-adjacent-violators).

    Tied scores are first collapsed into one point with their summed weight and weighted mean
    label, so equal scores always get one value. PAVA then runs in O(N) after the sort.

    Parameters
    ----------
    interpolate : bool, default=True
        ``True`` gives a :class:`~mlcal.maps.LinearMap` through the block end points, which is
        what scikit-learn's ``IsotonicRegression(out_of_bounds="clip").predict`` computes.
        ``False`` gives the piecewise-constant :class:`~mlcal.maps.StepMap` of Zadrozny & Elkan,
        with cuts halfway between adjacent blocks.
    max_map_size : int or None, default=10000
        Cap on the size of the fitted map (knots or bins); a larger map is reduced by
        :func:`mlcal.maps.reduce_map` and ``map_reduction_`` records the original size and the
        measured sup-norm error. ``None`` keeps the map as fitted.
    bound_smoothing : float or None, default=None
        ``a > 0`` keeps predictions off exactly 0 and 1: runs of the map at a bound take their
        Beta(a, a) posterior mean, clipped to their neighbours (monotone maps stay monotone; see
        :func:`mlcal.calibrators.base.keep_off_bounds`). ``None`` keeps the map as fitted.

    Attributes
    ----------
    map_ : LinearMap or StepMap
        The fitted map.
    n_blocks_ : int
        Number of constant pieces of the isotonic fit.
    map_reduction_ : MapReduction
        Original map size, final size and measured sup-norm error of the size cap.

    Examples
    --------
    >>> from mlcal import Isotonic
    >>> cal = Isotonic().fit([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1])
    >>> cal.predict([0.1, 0.25, 0.4]).round(3).tolist()
    [0.0, 0.5, 1.0]
    """

    map_kinds = ("linear", "step")
    monotone = True   # PAVA block means
    _parameter_constraints = {"interpolate": [Boolean()],
                              "max_map_size": MAX_MAP_SIZE_CONSTRAINTS,
        "bound_smoothing": BOUND_SMOOTHING_CONSTRAINTS}

    def __init__(self, interpolate: bool = True, max_map_size: int | None = DEFAULT_MAX_MAP_SIZE,
                 bound_smoothing: float | None = None):
        self.interpolate = interpolate
        self.max_map_size = max_map_size
        self.bound_smoothing = bound_smoothing

    def _fit(self, scores, y, w):
        return self._fit_points(*sort_and_collapse(scores, y, w), scores)

    def _fit_points(self, x, ybar, wsum, scores):
        # scores a subnormal distance apart count as tied: the slope between them overflows
        x, ybar, wsum = merge_close(x, ybar, wsum, MIN_SLOPE_GAP)
        starts, values = pava_blocks(ybar, wsum)
        ends = np.append(starts[1:], x.size) - 1
        self.n_blocks_ = int(values.size)
        if not self.interpolate:
            cuts = midpoint_cuts(x[ends[:-1]], x[starts[1:]])
            return StepMap(cuts, np.clip(values, 0.0, 1.0))
        # the block end points carry the whole piecewise-linear function
        idx = np.unique(np.concatenate((starts, ends)))
        block_of = np.searchsorted(starts, idx, side="right") - 1
        return LinearMap(x[idx], np.clip(values[block_of], 0.0, 1.0))
