"""Histogram (equal-frequency) binning calibration (Zadrozny & Elkan 2001)."""

from __future__ import annotations

import numpy as np

from mlcal._solvers.binning import equal_frequency_bins
from mlcal._solvers.exact import round_cbrt
from mlcal._solvers.ties import midpoint_cuts, sort_and_collapse
from mlcal.calibrators._params import Integer, Options
from mlcal.calibrators.base import (BOUND_SMOOTHING_CONSTRAINTS, MAX_MAP_SIZE_CONSTRAINTS,
                                    BaseCalibrator)
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import DEFAULT_MAX_MAP_SIZE, StepMap


@register_calibrator("histogram")
class HistogramBinning(BaseCalibrator):
    """Equal-frequency histogram binning: each bin predicts its fraction of positives.

    Parameters
    ----------
    n_bins : int or "auto", default="auto"
        Number of bins. ``"auto"`` uses round(N^(1/3)) (computed exactly, halves up) with N the
        total sample weight, the rate the histogram-binning theory paper (Naeini et al., arXiv
        1401.3390) recommends. Tied scores are never split, so fewer bins may be realised (see
        ``n_bins_``); the number of bins is capped at the number of unique scores.
    max_map_size : int or None, default=10000
        Cap on the size of the fitted map (bins); a larger map is reduced by
        :func:`mlcal.maps.reduce_map` and ``map_reduction_`` records the original size and the
        measured sup-norm error. ``None`` keeps the map as fitted.
    bound_smoothing : float or None, default=None
        ``a > 0`` keeps predictions off exactly 0 and 1: runs of the map at a bound take their
        Beta(a, a) posterior mean, clipped to their neighbours (monotone maps stay monotone; see
        :func:`mlcal.calibrators.base.keep_off_bounds`). ``None`` keeps the map as fitted.

    Attributes
    ----------
    map_ : StepMap
        Cuts halfway between the last score of a bin and the first score of the next; a score
        equal to a cut goes to the upper bin.
    n_bins_ : int
        Number of bins realised (before any size cap).
    map_reduction_ : MapReduction
        Original map size, final size and measured sup-norm error of the size cap.
    """

    map_kinds = ("step",)   # bin rates: any order
    _parameter_constraints = {"n_bins": [Integer(1), Options(("auto",))],
                              "max_map_size": MAX_MAP_SIZE_CONSTRAINTS,
        "bound_smoothing": BOUND_SMOOTHING_CONSTRAINTS}

    def __init__(self, n_bins: int | str = "auto",
                 max_map_size: int | None = DEFAULT_MAX_MAP_SIZE,
                 bound_smoothing: float | None = None):
        self.n_bins = n_bins
        self.max_map_size = max_map_size
        self.bound_smoothing = bound_smoothing

    def _resolve_n_bins(self, total_weight: float) -> int:
        if self.n_bins == "auto":
            return max(1, round_cbrt(total_weight))
        return int(self.n_bins)

    def _fit(self, scores, y, w):
        x, ybar, wsum = sort_and_collapse(scores, y, w)
        bins = equal_frequency_bins(wsum, self._resolve_n_bins(float(wsum.sum())))
        n_realised = int(bins[-1]) + 1
        pos = np.bincount(bins, weights=ybar * wsum, minlength=n_realised)
        tot = np.bincount(bins, weights=wsum, minlength=n_realised)
        first = np.flatnonzero(np.diff(bins)) + 1      # first point of bins 1..B'-1
        cuts = midpoint_cuts(x[first - 1], x[first])
        self.n_bins_ = n_realised
        return StepMap(cuts, np.clip(pos / tot, 0.0, 1.0))
