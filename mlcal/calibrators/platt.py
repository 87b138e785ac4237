"""Platt scaling: a logistic sigmoid fitted to the scores by maximum likelihood."""

from __future__ import annotations

import numpy as np

from mlcal._solvers.platt_newton import fit_sigmoid, platt_targets
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators._params import Boolean
from mlcal.calibrators.base import BaseCalibrator
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import SigmoidMap


@register_calibrator("platt")
class Platt(BaseCalibrator):
    """Platt scaling, ``p = 1 / (1 + exp(A * s + B))``.

    Fitted on the scores as given (raw margins or probabilities) by a Newton method with
    backtracking line search (Lin, Lin & Weng 2007), which converges in a handful of O(N) steps.
    The solver standardises the scores internally and maps ``A``, ``B`` back, so the fit is
    invariant to affine rescaling of the scores (``c s + d`` gives ``A / c`` and
    ``B - A d / c``, up to a few ulps). Tied scores are merged into weighted points first, so
    the fitted map (and its JSON) does not depend on the order of the rows.

    Parameters
    ----------
    smooth_targets : bool, default=True
        Use Platt's (1999) regularised targets ``(N+ + 1)/(N+ + 2)`` for positives and
        ``1/(N- + 2)`` for negatives (weighted counts), which keeps A finite on separable data.
        ``False`` fits the plain 0/1 labels (unbounded on separable data).

    Attributes
    ----------
    map_ : SigmoidMap
        With ``a = A`` and ``b = B``.
    n_iter_ : int
        Newton iterations used.
    """

    map_kinds = ("sigmoid",)   # a > 0 on anti-correlated scores: not monotone
    _parameter_constraints = {"smooth_targets": [Boolean()]}

    def __init__(self, smooth_targets: bool = True):
        self.smooth_targets = smooth_targets

    def _fit(self, scores, y, w):
        # the cross-entropy is linear in the target, so tied rows merge exactly into one point
        # with the weighted mean target; sorted sums make the fit independent of row order
        return self._fit_points(*sort_and_collapse(scores, y, w), scores)

    def _fit_points(self, x, ybar, wsum, scores):
        t = platt_targets(ybar, wsum) if self.smooth_targets else ybar
        a, b, self.n_iter_ = fit_sigmoid(x, t, wsum)
        if not (np.isfinite(a) and np.isfinite(b)):
            raise ValueError("Platt: the fitted slope is not representable (the scores' spread, "
                             f"{x[-1] - x[0]:.3g}, is too small for double precision); "
                             "rescale the scores")
        return SigmoidMap(a, b)
