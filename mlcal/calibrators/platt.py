"""Platt scaling: a logistic sigmoid fitted to the scores by maximum likelihood."""

from __future__ import annotations

import numpy as np

from mlcal._solvers.platt_newton import fit_sigmoid
from mlcal.calibrators._params import Boolean
from mlcal.calibrators.base import BaseCalibrator
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import SigmoidMap


@register_calibrator("platt")
class Platt(BaseCalibrator):
    """Platt scaling, ``p = 1 / (1 + exp(A * s + B))``.

    Fitted on the scores as given (raw margins or probabilities) by a Newton method with
    backtracking line search (Lin, Lin & Weng 2007), which converges in a handful of O(N) steps.

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

    _parameter_constraints = {"smooth_targets": [Boolean()]}

    def __init__(self, smooth_targets: bool = True):
        self.smooth_targets = smooth_targets

    def _fit(self, scores, y, w):
        t = y
        if self.smooth_targets:
            n_pos = float(np.sum(w * y))   # not np.dot: BLAS kernels sum in a CPU-specific order
            n_neg = float(w.sum()) - n_pos
            t = np.where(y > 0, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
        a, b, self.n_iter_ = fit_sigmoid(scores, t, w)
        return SigmoidMap(a, b)
