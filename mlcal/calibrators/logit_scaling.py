"""One-feature logistic calibrators on the log-odds of the scores: Platt scaling on the logit of
probability scores (``platt-logit``) and binary temperature scaling (``temperature``).

On probability scores the fitted map is a :class:`~mlcal.maps.BetaMap` with ``a = b``; on raw
margins (``input_transform="sigmoid"``, or ``"auto"`` with scores outside [0, 1]) the log-odds
of ``sigmoid(m)`` is ``m`` itself, so the same model is fitted on the margins directly and
stored exactly as a :class:`~mlcal.maps.SigmoidMap` (no clamping, no round trip through
probabilities).
"""

from __future__ import annotations

from typing import ClassVar

from mlcal._solvers.beta_fit import fit_logit_scaling_points
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators._params import Boolean, Options, Real
from mlcal.calibrators.base import INPUT_TRANSFORM_CHOICES, BaseCalibrator, resolve_input_transform
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import BetaMap, SigmoidMap
from mlcal.maps.binary import DEFAULT_CLAMP, data_clamp


class _LogitScaling(BaseCalibrator):
    """``p = expit(k * logit(s) + c)`` with ``k >= 0``; subclasses say whether ``c`` is fitted."""

    map_kinds = ("beta", "sigmoid")
    monotone = True   # slope k >= 0
    intercept: ClassVar[bool] = True
    _parameter_constraints = {"smooth_targets": [Boolean()],
                              "input_transform": [Options(INPUT_TRANSFORM_CHOICES)],
                              "identity_prior": [Real(0.0)]}

    def __init__(self, smooth_targets: bool = True, input_transform: str = "auto",
                 identity_prior: float = 0.0):
        self.smooth_targets = smooth_targets
        self.input_transform = input_transform
        self.identity_prior = identity_prior

    def _fit(self, scores, y, w):
        return self._fit_points(*sort_and_collapse(scores, y, w), scores)

    def _fit_points(self, x, ybar, wsum, scores):
        # the map records the identity transform either way: margins get an exact SigmoidMap
        margins = resolve_input_transform(self, self.input_transform, scores) == "sigmoid"
        clamp = DEFAULT_CLAMP if margins else data_clamp(x)
        k, c = fit_logit_scaling_points(x, ybar, wsum, intercept=self.intercept,
                                        smooth=self.smooth_targets, method=self.method_name,
                                        on_logit=not margins,
                                        identity_prior=float(self.identity_prior), clamp=clamp)
        if margins:
            return SigmoidMap(-k, -c)   # SigmoidMap is 1 / (1 + exp(a m + b))
        return BetaMap(k, k, c, clamp=clamp)


@register_calibrator("platt-logit")
class PlattLogit(_LogitScaling):
    """Platt scaling on the log-odds: ``p = expit(k ln(s / (1 - s)) + c)``, ``k >= 0``.

    Platt's sigmoid fitted to ``logit(s)`` instead of ``s``, which suits probability scores
    (``platt`` on probabilities fits a sigmoid in ``s`` and cannot reach 0 or 1 at the ends).
    The same model as ``beta`` with ``parameters="am"``. On raw margins it is ``platt``'s model
    constrained to a non-negative slope (the log-odds of ``sigmoid(m)`` is ``m``), returned
    as a SigmoidMap; ``platt`` itself already fits margins as they are.

    Parameters
    ----------
    smooth_targets : bool, default=True
        Platt's (1999) regularised targets instead of 0/1 labels (keeps ``k`` finite on
        separable data); ``False`` is the plain maximum-likelihood fit (``ValueError`` on
        separable data).
    input_transform : {"auto", "identity", "sigmoid"}, default="auto"
        ``"identity"``: the scores are probabilities (outside [0, 1] is an error);
        ``"sigmoid"``: the scores are margins (log-odds); ``"auto"``: margins when any
        training score lies outside [0, 1].
    identity_prior : float, default=0.0
        Rows' worth of pseudo-data labelled with the base model's own probabilities (the
        score, or ``sigmoid(margin)``), spread over the calibration rows in proportion to
        their weights: the fit minimises the cross-entropy plus ``identity_prior`` times the
        mean Kullback-Leibler divergence from the base probabilities to the fitted ones, a
        prior that the base model is calibrated (zero at ``k = 1, c = 0``) whose weight fades
        as the calibration set grows. 0: none. ``auto`` fits ``platt-logit`` with 100 and
        0/1 targets (docs/auto.md, "Ranks against the peers").

    Attributes
    ----------
    map_ : BetaMap or SigmoidMap
        ``BetaMap(k, k, c)`` on probabilities, ``SigmoidMap(-k, -c)`` on margins.
    """


@register_calibrator("temperature")
class Temperature(_LogitScaling):
    """Binary temperature scaling (Guo et al. 2017): ``p = expit(logit(s) / T)``, ``T > 0``.

    One parameter and no bias, fitted by weighted maximum likelihood; the slope ``1/T`` is
    constrained to be >= 0 (``T = inf``, the constant 1/2, when the scores are anti-correlated
    with the labels). For the multiclass version see
    :class:`~mlcal.calibrators.multiclass.TemperatureScaling`.

    Parameters
    ----------
    smooth_targets : bool, default=True
        As for ``platt-logit``.
    input_transform : {"auto", "identity", "sigmoid"}, default="auto"
        As for ``platt-logit``: probabilities give ``BetaMap(1/T, 1/T, 0)``, margins (logits)
        ``SigmoidMap(-1/T, 0)``.
    identity_prior : float, default=0.0
        As for ``platt-logit`` (shrinks ``1/T`` toward 1).

    Attributes
    ----------
    map_ : BetaMap or SigmoidMap
    temperature_ : float
        ``T`` (``inf`` when the fitted slope is 0).
    """

    intercept = False

    @property
    def temperature_(self) -> float:
        """``T`` read off the fitted map (so it survives a JSON round trip)."""
        if not hasattr(self, "map_"):
            raise AttributeError("temperature_: this Temperature is not fitted yet")
        slope = self.map_.a if isinstance(self.map_, BetaMap) else -self.map_.a
        return 1.0 / slope if slope > 0 else float("inf")
