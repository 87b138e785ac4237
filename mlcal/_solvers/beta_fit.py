"""Maximum-likelihood fits behind the beta-family calibrators (beta calibration, Platt on
log-odds, binary temperature scaling): features of the collapsed scores and the constrained
logistic fits of :mod:`mlcal._solvers.logistic_newton`.

Beta calibration (Kull, Silva Filho & Flach 2017) is logistic regression of the label on
``ln s`` and ``-ln(1 - s)``: ``p = expit(a ln s - b ln(1 - s) + c)``. Its reduced variants fix
``a = b`` ("am": one feature, the log-odds ``ln(s / (1 - s))``, plus the intercept) or the
midpoint ``m = 1/2`` ("ab": features ``ln(2 s)`` and ``-ln(2 (1 - s))`` without intercept, i.e.
``c = (a - b) ln 2``). Every coefficient of a score feature is constrained to be >= 0 so the
map is non-decreasing (see :func:`~mlcal._solvers.logistic_newton.fit_nonnegative`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_expit, det_expit_array, det_log
from mlcal._solvers.logistic_newton import fit_logistic, fit_nonnegative
from mlcal._solvers.platt_newton import platt_targets
from mlcal._solvers.ties import sort_and_collapse
from mlcal.maps.binary import DEFAULT_CLAMP, clamped_logs, logit_clamped

BETA_PARAMETERS = ("abm", "ab", "am")
LN2 = 0.6931471805599453   # ln 2 correctly rounded to float64


def collapsed_targets(scores: np.ndarray, y: np.ndarray, w: np.ndarray, smooth: bool):
    """Sorted unique scores, their (optionally Platt-smoothed) targets and total weights, and
    the starting intercept (log-odds of the weighted base rate, +1 smoothed as Platt's)."""
    return point_targets(*sort_and_collapse(scores, y, w), smooth)


def point_targets(x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray, smooth: bool):
    """:func:`collapsed_targets` from the collapsed points (``sort_and_collapse``'s output)."""
    t = platt_targets(ybar, wsum) if smooth else ybar
    n_pos = float(np.sum(wsum * ybar))   # not np.dot: BLAS sums in a CPU-specific order
    n_neg = float(np.sum(wsum)) - n_pos
    return x, t, wsum, float(det_log((n_pos + 1.0) / (n_neg + 1.0)))


def total_weight(wsum: np.ndarray) -> float:
    """``math.fsum(wsum.tolist())``, the correctly rounded total weight (``OverflowError``
    where that is beyond the largest double), without the list when the weights are counts:
    non-negative integers with ``max * n <= 2**53`` (decided in integer arithmetic), whose
    partial sums are all integers of at most ``2**53``, hence exact in any order, so NumPy's
    sum is the exact total itself."""
    n = wsum.size
    if n:
        top = float(np.max(wsum))
        if top <= 2.0 ** 53 and float(np.min(wsum)) >= 0.0 and int(top) * n <= 2 ** 53 \
                and bool((wsum == np.rint(wsum)).all()):
            return float(np.sum(wsum))
    return math.fsum(wsum.tolist())


def prior_total(wsum: np.ndarray) -> float | None:
    """:func:`total_weight`, or ``None`` where it overflows (then
    :func:`identity_prior_targets` leaves the targets as they are)."""
    try:
        return total_weight(wsum)
    except OverflowError:
        return None


def identity_prior_targets(t: np.ndarray, wsum: np.ndarray, base: np.ndarray,
                           prior_rows: float, total: float | None = None) -> np.ndarray:
    """Targets of the data plus ``prior_rows`` rows of pseudo-data spread over the points in
    proportion to their weights ``wsum``, labelled with the base model's probabilities
    ``base``. The cross-entropy is linear in the target, so the augmented objective is the
    weighted cross-entropy plus ``r = prior_rows / W`` times the cross-entropy against the base
    probabilities (``W`` the correctly rounded total weight): a penalty ``prior_rows`` times
    the mean KL divergence from the base probabilities to the fitted ones, zero at the identity
    map, fading as the data grow. Divided by ``1 + r`` (same minimiser), that is the weighted
    cross-entropy, weights unchanged, against ``(1 - beta) t + beta base`` with
    ``beta = prior_rows / (W + prior_rows)``, which never overflows (tiny or huge weights).

    ``total``: ``W`` (:func:`total_weight`) when the caller has it already."""
    if total is None:
        try:
            total = total_weight(wsum)
        except OverflowError:   # weights near the largest double: the prior is nothing
            return t
    beta = float(prior_rows) / (total + float(prior_rows))
    out = (1.0 - beta) * t   # (1 - beta) t + beta base, the same operations, one temporary less
    out += beta * base
    return out


@njit(cache=True, nogil=True)
def _temperature_targets(t, logit, k, keep, beta):
    """``keep * t + beta * det_expit_array(k * logit)`` in one pass (the same operations per
    row, so the same bits as :func:`identity_prior_targets` of those probabilities)."""
    out = np.empty(t.shape[0])
    for i in range(t.shape[0]):
        out[i] = keep * t[i] + beta * det_expit(k * logit[i])
    return out


def log_features(s: np.ndarray, clamp: tuple[float, float] = DEFAULT_CLAMP
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``ln s`` and ``-ln(1 - s)`` of the scores clamped to ``clamp`` as
    :class:`~mlcal.maps.BetaMap` does."""
    log_s, log_1ms = clamped_logs(s, clamp)
    return log_s, -log_1ms


def separable_error(method: str) -> ValueError:
    """The error for a maximum-likelihood fit whose optimum is at infinity."""
    return ValueError(f"{method}: the labels are separable by the score, so the "
                      "maximum-likelihood parameters are infinite; use smooth_targets=True "
                      "(Platt's regularised targets) or more calibration data")


def fit_beta(s: np.ndarray, y: np.ndarray, w: np.ndarray, parameters: str, smooth: bool,
             clamp: tuple[float, float] = DEFAULT_CLAMP,
             identity_prior: float = 0.0) -> tuple[float, float, float]:
    """``(a, b, c)`` of the beta map fitted by weighted maximum likelihood, ``a, b >= 0``, on
    the scores clamped to ``clamp`` (the map's).

    ``identity_prior = m > 0`` adds ``m`` rows' worth of pseudo-data labelled with the base
    model's own (clamped) probabilities (:func:`identity_prior_targets`, as
    :func:`fit_logit_scaling`), which shrinks the fit toward the identity map ``a = b = 1``,
    ``c = 0`` (in every variant's family) and keeps it finite on separable labels.

    Raises ``ValueError`` when the optimum is at infinity (only possible with ``smooth=False``
    and no prior).
    """
    return fit_beta_points(*sort_and_collapse(s, y, w), parameters, smooth, clamp,
                           identity_prior)


#: where the pseudo-rows of beta calibration's ``identity_prior`` take their labels: the base
#: model's own probabilities, or its temperature-scaled ones (``"temperature"``)
PRIOR_CENTERS = ("identity", "temperature")


def fit_beta_points(x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray, parameters: str,
                    smooth: bool, clamp: tuple[float, float] = DEFAULT_CLAMP,
                    identity_prior: float = 0.0,
                    prior_center: str = "identity") -> tuple[float, float, float]:
    """:func:`fit_beta` on the collapsed points (``sort_and_collapse``'s output).

    ``prior_center="temperature"``: the ``identity_prior`` pseudo-rows are labelled with the
    probabilities of the temperature-scaling fit (slope ``k >= 0`` on the clamped log-odds, no
    intercept, fitted first on the same targets and the same prior toward the identity), so the
    fit is shrunk toward that map, ``a = b = k``, ``c = 0`` (in every variant's family),
    rather than toward the identity."""
    if prior_center not in PRIOR_CENTERS:
        raise ValueError(f"prior_center must be one of {PRIOR_CENTERS}, got {prior_center!r}")
    x, t, wsum, start = point_targets(x, ybar, wsum, smooth)
    l1, l2 = log_features(x, clamp)
    logit = None   # l1 + l2, the clamped log-odds, computed once for every use
    if identity_prior > 0.0:
        total = prior_total(wsum)   # once for both prior targets
        base = np.clip(x, clamp[0], clamp[1])
        if prior_center == "temperature":
            logit = l1 + l2
            ident = identity_prior_targets(t, wsum, base, identity_prior, total)
            coef, _, _, ok = fit_nonnegative((logit,), ident, wsum, intercept=False,
                                             with_loss=False)
            if not ok:
                raise separable_error("beta calibration")
            if total is not None:
                # identity_prior_targets of the temperature fit's probabilities, fused
                beta = float(identity_prior) / (total + float(identity_prior))
                t = _temperature_targets(t, logit, float(coef[0]), 1.0 - beta, beta)
        else:
            t = identity_prior_targets(t, wsum, base, identity_prior, total)
    # the features go to the solver as columns (no n x k copy of them; the same bits)
    if parameters == "abm":
        coef, c, _, ok = fit_nonnegative((l1, l2), t, wsum, intercept=True,
                                         start_intercept=start, with_loss=False)
        a, b = coef
    elif parameters == "am":
        coef, c, _, ok = fit_nonnegative((l1 + l2 if logit is None else logit,), t, wsum,
                                         intercept=True, start_intercept=start,
                                         with_loss=False)
        a = b = coef[0]
    elif parameters == "ab":
        coef, _, _, ok = fit_nonnegative((l1 + LN2, l2 - LN2), t, wsum,
                                         intercept=False, with_loss=False)
        a, b = coef
        c = a * LN2 - b * LN2
    else:
        raise ValueError(f"parameters must be one of {BETA_PARAMETERS}, got {parameters!r}")
    if not ok:
        raise separable_error("beta calibration")
    return float(a), float(b), float(c)


def fit_logit_scaling(feature: np.ndarray, y: np.ndarray, w: np.ndarray, *, intercept: bool,
                      smooth: bool, method: str, on_logit: bool,
                      identity_prior: float = 0.0,
                      clamp: tuple[float, float] = DEFAULT_CLAMP) -> tuple[float, float]:
    """``(slope, intercept)`` of ``expit(slope * f + intercept)`` with ``slope >= 0``, where
    ``f`` is the score's log-odds (``on_logit``: probability scores, clamped to ``clamp`` as
    BetaMap) or the score itself (a margin). Without ``intercept`` the intercept is 0
    (temperature scaling).

    ``identity_prior = m > 0`` adds ``m`` rows' worth of pseudo-data whose labels are the base
    model's own probabilities (:func:`identity_prior_targets`), which shrinks the fit toward
    the identity map (slope 1, intercept 0)."""
    return fit_logit_scaling_points(*sort_and_collapse(feature, y, w), intercept=intercept,
                                    smooth=smooth, method=method, on_logit=on_logit,
                                    identity_prior=identity_prior, clamp=clamp)


def fit_logit_scaling_points(x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray, *,
                             intercept: bool, smooth: bool, method: str, on_logit: bool,
                             identity_prior: float = 0.0,
                             clamp: tuple[float, float] = DEFAULT_CLAMP) -> tuple[float, float]:
    """:func:`fit_logit_scaling` on the collapsed points (``sort_and_collapse``'s output)."""
    x, t, wsum, start = point_targets(x, ybar, wsum, smooth)
    if identity_prior > 0.0:
        base = np.clip(x, clamp[0], clamp[1]) if on_logit else det_expit_array(x)
        t = identity_prior_targets(t, wsum, base, identity_prior)
    if on_logit:
        l1, l2 = log_features(x, clamp)
        x = l1 + l2
    coef, c, _, ok = fit_nonnegative((x,), t, wsum, intercept=intercept,
                                     start_intercept=start, with_loss=False)
    if not ok:
        raise separable_error(method)
    return float(coef[0]), float(c)


def fit_quadratic(feature: np.ndarray, y: np.ndarray, w: np.ndarray, *, smooth: bool,
                  penalty: float, on_logit: bool, square: bool = True,
                  identity_prior: float = 0.0,
                  clamp: tuple[float, float] = DEFAULT_CLAMP) -> tuple[float, float, float]:
    """``(a, b, c)`` of quadratic scaling ``expit(a z + b z^2 + c)`` by penalised weighted
    maximum likelihood, where ``z`` is the score's log-odds (``on_logit``: probability scores,
    clamped to ``clamp`` and transformed as :func:`mlcal.maps.binary.logit_clamped`) or the
    score itself (a margin).

    The objective is the weighted cross-entropy against the (optionally Platt-smoothed)
    targets plus ``penalty / 2 * (b * sd_w(z^2))^2``, ``sd_w`` the weighted standard deviation
    of ``z^2`` over the calibration rows: a ridge on the coefficient of the standardised square,
    in units of total weight (see :func:`~mlcal._solvers.logistic_newton.fit_logistic`, which
    standardises ``z`` and ``z^2`` for conditioning and maps the coefficients back). ``a`` and
    ``b`` are unconstrained (the map need not be monotone). ``square=False`` fits ``b = 0``
    (Platt scaling on the log-odds without its ``a >= 0`` constraint).

    ``identity_prior = m > 0`` adds ``m`` rows' worth of pseudo-data labelled with the base
    model's own probabilities (:func:`identity_prior_targets`, as :func:`fit_logit_scaling`),
    which shrinks the fit toward the identity map ``a = 1, b = 0, c = 0`` and keeps it finite
    on separable labels.

    Raises ``ValueError`` when the optimum is at infinity (only possible with ``smooth=False``
    and no prior).
    """
    return fit_quadratic_points(*sort_and_collapse(feature, y, w), smooth=smooth,
                                penalty=penalty, on_logit=on_logit, square=square,
                                identity_prior=identity_prior, clamp=clamp)


def fit_quadratic_points(x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray, *, smooth: bool,
                         penalty: float, on_logit: bool, square: bool = True,
                         identity_prior: float = 0.0,
                         clamp: tuple[float, float] = DEFAULT_CLAMP) -> tuple[float, float, float]:
    """:func:`fit_quadratic` on the collapsed points (``sort_and_collapse``'s output)."""
    x, t, wsum, start = point_targets(x, ybar, wsum, smooth)
    if identity_prior > 0.0:
        base = np.clip(x, clamp[0], clamp[1]) if on_logit else det_expit_array(x)
        total = prior_total(wsum)
        prior_t = identity_prior_targets(t, wsum, base, identity_prior, total)
        if prior_t is not t:
            # the targets' objective is the augmented one divided by 1 + m / W: so is the
            # ridge, which stays in units of the data's own weight
            penalty = float(penalty) * (total / (total + float(identity_prior)))
        t = prior_t
    z = logit_clamped(x, clamp) if on_logit else x
    if square:
        coef, c, _, ok = fit_logistic((z, z * z), t, wsum, intercept=True,
                                      start_intercept=start, penalty=[0.0, float(penalty)],
                                      with_loss=False)
        a, b = coef
    else:
        coef, c, _, ok = fit_logistic((z,), t, wsum, intercept=True,
                                      start_intercept=start, with_loss=False)
        a, b = coef[0], 0.0
    if not ok:
        raise separable_error("quadratic scaling")
    return float(a), float(b), float(c)
