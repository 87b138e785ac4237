"""Quadratic scaling: logistic regression of the label on ``[1, z, z^2]``, ``z`` the log-odds of
the score, stored as one :class:`~mlcal.maps.QuadraticMap`.

On probability scores ``z = ln(s) - ln(1 - s)`` of the score clamped to
``[BETA_EPS, 1 - BETA_EPS]``, widened to the most extreme calibration scores inside ``(0, 1)``
where they lie beyond it (as beta calibration clamps, :func:`~mlcal.maps.binary.data_clamp`);
on raw margins
(``input_transform="sigmoid"``, or ``"auto"`` with scores outside [0, 1]) the log-odds of
``sigmoid(m)`` is ``m`` itself, so the margins are used directly and the map records
``on="margin"`` (no clamp, no round trip through probabilities), as ``platt-logit`` does with
its SigmoidMap.
"""

from __future__ import annotations

from mlcal._solvers.beta_fit import fit_quadratic_points
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators._params import Boolean, Options, Real
from mlcal.calibrators.base import INPUT_TRANSFORM_CHOICES, BaseCalibrator, resolve_input_transform
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import QuadraticMap
from mlcal.maps.binary import DEFAULT_CLAMP, data_clamp

#: default ridge on the standardised z^2 coefficient, in units of total weight (see Quadratic)
DEFAULT_PENALTY = 1.0


@register_calibrator("quadratic")
class Quadratic(BaseCalibrator):
    """Quadratic scaling, ``p = expit(a z + b z^2 + c)`` with ``z`` the log-odds of the score.

    Platt scaling on the log-odds (``platt-logit``) plus a squared term, which lets the map
    bend differently in the two tails: over- and under-confidence at once, or a base model that
    is well calibrated in the middle and not at the ends. Fitted by penalised weighted maximum
    likelihood with mlcal's deterministic damped Newton (the one behind ``beta`` and
    ``platt-logit``; ``z`` and ``z^2`` are standardised inside the solver and the coefficients
    mapped back), on tied scores merged into weighted points, so the map does not depend on
    the order of the rows and has the same bits on every CPU.

    The map is **not monotone** in general (``monotone = False``): with ``b != 0`` it turns at
    ``z = -a / (2 b)``. Where that point lies inside the data the fit says the calibration
    curve really turns there (or, on small sets, overfits -- which is what ``penalty`` is for);
    where it lies beyond the data the map is monotone over every score the base model produced.
    Use ``platt-logit`` or ``beta`` when a monotone map is a requirement.

    Penalty: the objective is the weighted cross-entropy plus
    ``penalty / 2 * (b * sd_w(z^2))^2`` -- a ridge on the coefficient of the *standardised*
    square (``sd_w`` its weighted standard deviation over the calibration rows), so the
    penalty does not depend on the scale of the scores, and in units of total weight, so it is
    a fixed amount of prior evidence whose influence fades as the calibration set grows
    (about ``penalty`` rows' worth of log loss). ``a`` and ``c`` are not penalised: with a
    large penalty the fit tends to Platt scaling on the log-odds. The default ``1.0`` was
    chosen on held-out log loss against 0, 0.1, 10 and 100 (``benchmarks/bench_quadratic.py``,
    figures in docs/quadratic.md). It had the lowest mean log loss on 32 real-score tasks
    (0.2591 vs 0.2614 unpenalised and 0.2600 for ``platt-logit``) and on simulated curves that
    really bend. Where Platt on the log-odds is already right, it cost +0.0016 on average. A
    prior worth about one row keeps the squared term from chasing noise on calibration sets of
    tens of rows and is negligible at thousands.

    Parameters
    ----------
    penalty : float, default=1.0
        Ridge ``lam >= 0`` on the standardised ``z^2`` coefficient (0: plain maximum
        likelihood).
    smooth_targets : bool, default=True
        Platt's (1999) regularised targets instead of 0/1 labels (keeps the coefficients
        finite on separable data); ``False`` is the plain (penalised) maximum-likelihood fit
        (``ValueError`` on separable data).
    input_transform : {"auto", "identity", "sigmoid"}, default="auto"
        ``"identity"``: the scores are probabilities (outside [0, 1] is an error);
        ``"sigmoid"``: the scores are margins (log-odds) and the map takes them as they are
        (``on="margin"``); ``"auto"``: margins when any training score lies outside [0, 1].
    identity_prior : float, default=0.0
        ``m >= 0`` rows' worth of pseudo-data labelled with the base model's own probability
        at each calibration score, spread in proportion to the weights (as ``platt-logit``'s
        ``identity_prior``): the fit minimises the penalised cross-entropy plus ``m`` times the
        mean Kullback-Leibler divergence from the base probabilities to the fitted ones, zero
        at the identity map (``a = 1``, ``b = c = 0``), so the fit is shrunk toward "the base
        model is already calibrated", stays finite on separable labels, and the prior fades as
        the calibration set grows. 0: no prior.

    Attributes
    ----------
    map_ : QuadraticMap
        ``on="logit"`` on probabilities, ``on="margin"`` on margins.
    """

    map_kinds = ("quadratic",)
    monotone = False   # b != 0 bends the map; see the class notes
    _parameter_constraints = {"penalty": [Real(0.0)], "smooth_targets": [Boolean()],
                              "input_transform": [Options(INPUT_TRANSFORM_CHOICES)],
                              "identity_prior": [Real(0.0)]}

    def __init__(self, penalty: float = DEFAULT_PENALTY, smooth_targets: bool = True,
                 input_transform: str = "auto", identity_prior: float = 0.0):
        self.penalty = penalty
        self.smooth_targets = smooth_targets
        self.input_transform = input_transform
        self.identity_prior = identity_prior

    def _fit(self, scores, y, w):
        return self._fit_points(*sort_and_collapse(scores, y, w), scores)

    def _fit_points(self, x, ybar, wsum, scores):
        # the map records the identity transform either way: margins are its z as they are
        margins = resolve_input_transform(self, self.input_transform, scores) == "sigmoid"
        clamp = DEFAULT_CLAMP if margins else data_clamp(x)
        a, b, c = fit_quadratic_points(x, ybar, wsum, smooth=self.smooth_targets,
                                       penalty=float(self.penalty), on_logit=not margins,
                                       identity_prior=float(self.identity_prior), clamp=clamp)
        return QuadraticMap(a, b, c, on="margin" if margins else "logit", clamp=clamp)
