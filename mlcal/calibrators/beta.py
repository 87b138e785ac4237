"""Beta calibration (Kull, Silva Filho & Flach 2017): logistic regression on ``ln s`` and
``-ln(1 - s)``, stored as one :class:`~mlcal.maps.BetaMap`."""

from __future__ import annotations

from mlcal._solvers.beta_fit import BETA_PARAMETERS, PRIOR_CENTERS, fit_beta_points
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators._params import Boolean, Options, Real
from mlcal.calibrators.base import BaseCalibrator
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import BetaMap
from mlcal.maps.binary import DEFAULT_CLAMP, data_clamp


@register_calibrator("beta")
class Beta(BaseCalibrator):
    """Beta calibration, ``p = expit(a ln(s) - b ln(1 - s) + c)`` for probability scores ``s``.

    Fitted by weighted maximum likelihood (Newton's method with backtracking on the convex
    logistic log-likelihood, deterministic; see ``docs/beta.md``) with ``a, b >= 0``, the exact
    optimum under that constraint, so the map is non-decreasing. Scores are clamped to
    ``[lo, hi]`` before the logs, at fit and predict time alike: ``[2**-40, 1 - 2**-40]``
    widened to the most extreme calibration scores inside ``(0, 1)`` where they lie beyond it
    (:func:`~mlcal.maps.binary.data_clamp`; ``lo >= 2**-1022``). Tied scores are
    merged into weighted points first, so the map does not depend on the order of the rows.

    Parameters
    ----------
    parameters : {"abm", "ab", "am"}, default="abm"
        The paper's variants: ``"abm"`` fits ``a``, ``b`` and ``c``; ``"am"`` fixes ``a = b``
        (Platt scaling on the log-odds ``ln(s / (1 - s))``, with intercept, as
        ``platt-logit``); ``"ab"`` fixes the midpoint (the score mapped to 1/2) at ``s = 1/2``,
        i.e. ``c = (a - b) ln 2``.
    smooth_targets : bool, default=True
        Fit Platt's (1999) regularised targets ``(N+ + 1)/(N+ + 2)`` and ``1/(N- + 2)``
        (weighted counts) instead of the 0/1 labels, as mlcal's ``platt`` does, which keeps the
        parameters finite when the score separates the classes. ``False`` is the plain
        maximum-likelihood fit of the paper; on separable data it raises ``ValueError``.
    input_transform : {"auto", "identity", "sigmoid"}, default="auto"
        ``"auto"`` squashes raw scores with the logistic sigmoid when any training score lies
        outside [0, 1]; ``"identity"`` requires probabilities; ``"sigmoid"`` always squashes.
    identity_prior : float, default=0.0
        ``m >= 0`` rows' worth of pseudo-data labelled with the base model's own probability
        at each calibration score (the score clamped as the map clamps it), spread over the
        scores in proportion to their weights, as ``platt-logit``'s and ``quadratic``'s
        ``identity_prior``: the fit minimises the cross-entropy plus ``m`` times the mean
        Kullback-Leibler divergence from the base probabilities to the fitted ones, zero at
        the identity map ``a = b = 1``, ``c = 0`` (which every variant of ``parameters``
        contains). The fit is shrunk toward "the base model is already calibrated", stays
        finite on separable labels (``smooth_targets=False`` included), and the prior fades
        as the calibration set grows; as ``m`` grows the map tends to the identity. 0: no
        prior (the plain fit).
    prior_center : {"identity", "temperature"}, default="identity"
        The map ``identity_prior`` shrinks toward. ``"identity"``: the base model's own
        probabilities (above). ``"temperature"``: the temperature-scaling fit ``a = b = k``,
        ``c = 0`` (slope ``k >= 0`` on the clamped log-odds, fitted first on the same targets
        with the same prior toward the identity), whose probabilities label the pseudo-rows
        instead: the fit is shrunk toward temperature scaling, as structured matrix scaling
        (Berta et al. 2026) shrinks toward its temperature pre-step. No effect without
        ``identity_prior``.

    Attributes
    ----------
    map_ : BetaMap
    """

    map_kinds = ("beta",)
    monotone = True   # a, b >= 0
    requires_unit_interval = True
    _parameter_constraints = {"parameters": [Options(BETA_PARAMETERS)],
                              "smooth_targets": [Boolean()], "identity_prior": [Real(0.0)],
                              "prior_center": [Options(PRIOR_CENTERS)]}

    def __init__(self, parameters: str = "abm", smooth_targets: bool = True,
                 input_transform: str = "auto", identity_prior: float = 0.0,
                 prior_center: str = "identity"):
        self.parameters = parameters
        self.smooth_targets = smooth_targets
        self.input_transform = input_transform
        self.identity_prior = identity_prior
        self.prior_center = prior_center

    def _fit(self, scores, y, w):
        return self._fit_points(*sort_and_collapse(scores, y, w), scores)

    def _fit_points(self, x, ybar, wsum, scores):
        transform = getattr(self, "_fit_transform", "identity")
        clamp = data_clamp(x, transform)
        if transform == "sigmoid":
            # a squashed margin near 1 leaves 1 - s with few digits, and a graph's own sigmoid
            # may round s an ulp away from predict's: the upper end stays the default, where
            # that ulp is a relative 2^-13 of 1 - s at most (the lower end has all its digits)
            clamp = (clamp[0], DEFAULT_CLAMP[1])
        a, b, c = fit_beta_points(x, ybar, wsum, self.parameters, self.smooth_targets, clamp,
                                  float(self.identity_prior), self.prior_center)
        return BetaMap(a, b, c, clamp=clamp)
