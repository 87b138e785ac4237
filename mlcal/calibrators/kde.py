"""KDE calibration: the Nadaraya-Watson estimator of Naeini, Cooper & Hauskrecht (arXiv
1401.3390, §4), folded into a canonical map."""

from __future__ import annotations

import warnings

import numpy as np

from mlcal._solvers.map_reduction import reduce_step
from mlcal._solvers.nadaraya_watson import (GaussianNW, boxcar_step, gaussian_grid,
                                            silverman_bandwidth)
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators._params import Options, Real
from mlcal.calibrators.base import (BOUND_SMOOTHING_CONSTRAINTS, MAX_MAP_SIZE_CONSTRAINTS,
                                    BaseCalibrator)
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import DEFAULT_MAX_MAP_SIZE, LinearMap, StepMap

KERNELS = ("boxcar", "gaussian")


@register_calibrator("kde")
class KDECalibrator(BaseCalibrator):
    """Kernel (Nadaraya-Watson) calibration: ``P(y=1 | s) = sum w y K / sum w K``.

    This is the paper's Bayes-rule plug-in with class-conditional kernel density estimates that
    share one bandwidth; the paper's experiments used it with the boxcar kernel and Silverman's
    bandwidth. (Its Eq. 5 carries spurious class-count factors that cancel only for balanced
    classes; the estimator here is the correct plug-in.)

    Scores need not lie in [0, 1]: the estimator is local and Silverman's bandwidth scales with
    the spread of the scores, so raw margins work as well as probabilities and are used as
    given (no input transform). The paper applied it to sigmoid-squashed SVM outputs; pass
    ``expit(margin)`` to reproduce that.

    Parameters
    ----------
    bandwidth : "silverman" or float, default="silverman"
        ``"silverman"``: h = 1.06 * sd * N^(-1/5), sd the weighted sample standard deviation
        (ddof = 1) and N the total sample weight. A float is used as h (> 0).
    kernel : {"boxcar", "gaussian"}, default="boxcar"
        ``"boxcar"`` (the paper's choice): window ``|s - X_i| <= h``, folded *exactly* into a
        :class:`~mlcal.maps.StepMap` with thresholds at ``X_i - h`` and just above ``X_i + h``;
        it equals the direct formula at every double, window ends included (each end rounded
        once, ``fl(X_i - h) <= s <= fl(X_i + h)``), as long as it fits in ``max_map_size``
        bins (about two per unique score before the cap). ``"gaussian"``: ``K(u) = exp(-u^2/2)``,
        tabulated as a :class:`~mlcal.maps.LinearMap` on an adaptive grid over the training
        range (see ``grid_tol``).
    grid_tol : float, default=1e-4
        Gaussian kernel only: the grid starts with spacing h/4 and intervals are split until
        linear interpolation is within ``grid_tol / 2`` of the exact estimate at 1/4, 1/2 and
        3/4 of every interval; the largest error seen is ``grid_error_``.
    max_map_size : int or None, default=10000
        Cap on the size of the fitted map (bins or knots). A larger map is reduced by
        :func:`mlcal.maps.reduce_map`; the boxcar step function is reduced straight from the
        sweep's arrays, so the full-size map is never built. ``map_reduction_`` records the
        original size and the measured sup-norm error. ``None`` keeps the map as fitted.

    Notes
    -----
    Fallbacks.

    * Empty boxcar window (scores more than h beyond the data, or in a gap wider than 2h): the
      weighted mean label of the nearest training score (the larger of two equally near ones),
      which is also the estimate at the nearest score whose window is not empty.
    * Gaussian kernel outside the training range: constant, equal to the estimate at the
      nearest end of the range (the exact estimate drifts slowly towards the extreme point's
      label there; the map does not extrapolate that).
    * Zero spread (all training scores equal): Silverman's h is 0 and the map is the constant
      weighted base rate, which is what either kernel gives for any h > 0 on such data.
    * Silverman's rule with a total weight <= 1 raises ``ValueError`` (ddof = 1 is undefined).

    Sample weights are frequency weights (they scale each point's kernel and enter N and sd).
    bound_smoothing : float or None, default=None
        ``a > 0`` keeps predictions off exactly 0 and 1: runs of the map at a bound take their
        Beta(a, a) posterior mean, clipped to their neighbours (monotone maps stay monotone; see
        :func:`mlcal.calibrators.base.keep_off_bounds`). ``None`` keeps the map as fitted.

    Attributes
    ----------
    map_ : StepMap (boxcar) or LinearMap (gaussian)
    bandwidth_ : float
        The bandwidth h used (0.0 for zero spread).
    n_gaps_ : int
        Boxcar: number of interior runs of empty windows filled by the nearest-neighbour rule.
    grid_error_ : float
        Gaussian: largest measured |map - exact estimate| at the grid check points (0 for
        boxcar, which is exact before the size cap).
    map_reduction_ : MapReduction
        Original map size, final size and measured sup-norm error of the size cap.
    """

    map_kinds = ("linear", "step")   # kernel regression: any order
    _parameter_constraints = {
        "bandwidth": [Options(("silverman",)), Real(0.0, closed="neither")],
        "kernel": [Options(KERNELS)],
        "grid_tol": [Real(0.0, closed="neither")],
        "max_map_size": MAX_MAP_SIZE_CONSTRAINTS,
        "bound_smoothing": BOUND_SMOOTHING_CONSTRAINTS,
    }

    def __init__(self, bandwidth: str | float = "silverman", kernel: str = "boxcar",
                 grid_tol: float = 1e-4, max_map_size: int | None = DEFAULT_MAX_MAP_SIZE,
                 bound_smoothing: float | None = None):
        self.bandwidth = bandwidth
        self.kernel = kernel
        self.grid_tol = grid_tol
        self.max_map_size = max_map_size
        self.bound_smoothing = bound_smoothing

    def _fit(self, scores, y, w):
        x, ybar, wsum = sort_and_collapse(scores, y, w)
        h = silverman_bandwidth(x, wsum) if self.bandwidth == "silverman" \
            else float(self.bandwidth)
        self.bandwidth_ = float(h)
        self.n_gaps_ = 0
        self.grid_error_ = 0.0
        if x.size == 1 or h == 0.0:
            # zero spread: every window holds all the data (or none of it -> nearest = all)
            rate = float(np.sum(wsum * ybar) / wsum.sum())   # np.dot's BLAS order varies by CPU
            if self.kernel == "boxcar":
                return StepMap(np.empty(0), [rate])
            return LinearMap([x[0]], [rate])
        if self.kernel == "boxcar":
            thresholds, values, self.n_gaps_ = boxcar_step(x, ybar, wsum, h)
            del x, ybar, wsum
            if self.max_map_size is not None and values.size > self.max_map_size:
                # reduce the sweep's arrays directly: a StepMap of millions of steps would be
                # copied and validated several times only to be merged away
                size = values.size
                thresholds, values, err = reduce_step(thresholds, values, self.max_map_size)
                self._record_reduction(size, err)
            return StepMap(thresholds, values)
        nw = GaussianNW(x, ybar, wsum, h)
        knots, values, err = gaussian_grid(nw, float(x[0]), float(x[-1]), float(self.grid_tol))
        self.grid_error_ = err
        if err > self.grid_tol:
            warnings.warn(f"KDE grid stopped at {knots.size} knots with a measured error of "
                          f"{err:.3g} > grid_tol={self.grid_tol}", RuntimeWarning, stacklevel=3)
        return LinearMap(knots, np.clip(values, 0.0, 1.0))
