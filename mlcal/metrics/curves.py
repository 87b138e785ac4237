"""Calibration slope and intercept (logistic recalibration) and the smooth-curve indices
ICI / E50 / E90 (Austin & Steyerberg 2019).

Slope and intercept: the logistic regression of the labels on ``z = logit(p)``::

    logit P(y = 1) = alpha + beta * z

* ``slope`` is ``beta`` of the joint fit (1 for a calibrated model; below 1 means the predictions
  are too extreme, as from an overfitted model), ``intercept_with_slope`` the ``alpha`` of that
  same fit;
* ``calibration_intercept`` ("calibration-in-the-large") is ``alpha`` fitted with ``beta`` fixed
  at 1, i.e. with ``z`` as an offset (0 for a calibrated model; > 0 means the predictions are too
  low on average). This is the clinical convention (Van Calster et al. 2016/2019, Steyerberg).

Intervals: Wald (estimate +- z_(1-a/2) * SE from the inverse Fisher information) and profile
likelihood (where twice the log-likelihood drop from its maximum reaches the chi-square(1)
quantile; the joint-fit intercept gets only the Wald interval). Sample weights act as frequency
weights (as in a GLM's ``freq_weights``).

ICI/E50/E90/Emax: with ``s`` the loess calibration curve (the fraction of positives smoothed
against ``p``), they are the mean, median, 90th percentile and maximum of ``|p_i - s(p_i)|`` over
the rows. The loess follows R's ``loess(y ~ p)`` defaults that Austin & Steyerberg used: local
quadratic (``degree=2``) weighted least squares with tricube weights over the nearest
``floor(span * n)`` rows, ``span = 0.75``, no robustness iterations. ``s`` is not clipped to
[0, 1]. With more than ``EXACT_CURVE_POINTS`` distinct forecasts the curve is evaluated exactly at
that many quantiles of ``p`` and linearly interpolated in between (R's default ``surface =
"interpolate"`` interpolates too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from mlcal._validation import as_weights, check_binary_forecasts

#: distinct forecasts up to which the loess curve is evaluated at every one of them
EXACT_CURVE_POINTS = 200
_MAX_NEWTON = 100


# --------------------------------------------------------------------------- slope / intercept

def _loglik(eta: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    # y * eta - log(1 + e^eta), summed with weights; logaddexp keeps it finite for large |eta|
    return float(np.sum(w * (y * eta - np.logaddexp(0.0, eta))))


def _fit_offset_intercept(offset: np.ndarray, y: np.ndarray, w: np.ndarray,
                          start: float = 0.0) -> float:
    """Maximum-likelihood ``alpha`` of ``logit P(y=1) = alpha + offset`` (concave, 1-D Newton
    with step halving from ``start``)."""
    a = start
    ll = _loglik(a + offset, y, w)
    for _ in range(_MAX_NEWTON):
        mu = expit(a + offset)
        g = float(np.sum(w * (y - mu)))
        h = float(np.sum(w * mu * (1.0 - mu)))
        if h <= 0.0:
            break
        step = g / h
        while True:
            new_ll = _loglik(a + step + offset, y, w)
            if new_ll >= ll or abs(step) < 1e-14:
                break
            step *= 0.5
        a += step
        converged = abs(step) < 1e-12 * (1.0 + abs(a))
        ll = new_ll
        if converged:
            break
    return a


def _fit_joint(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Maximum-likelihood ``(alpha, beta)`` by Newton's method with step halving."""
    theta = np.array([0.0, 1.0])
    ll = _loglik(theta[0] + theta[1] * z, y, w)
    for _ in range(_MAX_NEWTON):
        mu = expit(theta[0] + theta[1] * z)
        r = w * (y - mu)
        v = w * mu * (1.0 - mu)
        g = np.array([np.sum(r), np.sum(r * z)])
        h = np.array([[np.sum(v), np.sum(v * z)], [np.sum(v * z), np.sum(v * z * z)]])
        det = h[0, 0] * h[1, 1] - h[0, 1] * h[1, 0]
        if not det > 0.0:
            break
        step = np.array([h[1, 1] * g[0] - h[0, 1] * g[1], h[0, 0] * g[1] - h[1, 0] * g[0]]) / det
        while True:
            cand = theta + step
            new_ll = _loglik(cand[0] + cand[1] * z, y, w)
            if new_ll >= ll or np.max(np.abs(step)) < 1e-14:
                break
            step *= 0.5
        theta = cand
        ll = new_ll
        if np.max(np.abs(step)) < 1e-12 * (1.0 + np.max(np.abs(theta))):
            break
    return theta


def _information(z, w, alpha, beta) -> np.ndarray:
    mu = expit(alpha + beta * z)
    v = w * mu * (1.0 - mu)
    return np.array([[np.sum(v), np.sum(v * z)], [np.sum(v * z), np.sum(v * z * z)]])


def _profile_bounds(objective, estimate: float, se: float, drop: float) -> tuple[float, float]:
    """Where ``objective(t)`` (the profile log-likelihood drop, 0 at ``estimate`` and convex-like
    around it) reaches ``drop`` on either side, by bracketing and Brent's method."""
    from scipy.optimize import brentq

    bounds = []
    for side in (-1.0, 1.0):
        step = max(se, 1e-8)
        far = estimate + side * step
        tries = 0
        while objective(far) < drop:
            step *= 2.0
            far = estimate + side * step
            tries += 1
            if tries > 60:
                raise ValueError("the profile likelihood does not reach the interval level "
                                 "(the labels are separated by logit(p))")
        bounds.append(brentq(lambda t: objective(t) - drop, min(estimate, far),
                             max(estimate, far), xtol=1e-10 * (1.0 + abs(estimate))))
    return bounds[0], bounds[1]


@dataclass(frozen=True)
class CalibrationSlopeIntercept:
    """Logistic recalibration estimates with Wald and profile-likelihood intervals.

    Every ``*_wald`` and ``*_profile`` field is a ``(lower, upper)`` pair at ``confidence``;
    see the module docstring for the two intercept conventions.
    """

    slope: float
    slope_se: float
    slope_wald: tuple[float, float]
    slope_profile: tuple[float, float]
    intercept_with_slope: float
    intercept_with_slope_se: float
    intercept_with_slope_wald: tuple[float, float]
    calibration_intercept: float
    calibration_intercept_se: float
    calibration_intercept_wald: tuple[float, float]
    calibration_intercept_profile: tuple[float, float]
    confidence: float

    def as_dict(self) -> dict:
        """Plain-JSON form (pairs as lists)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _logit_inputs(y, p, sample_weight, eps):
    y, p = check_binary_forecasts(y, p)
    w = as_weights(sample_weight, p.shape[0])
    if eps is not None:
        if not 0.0 < eps < 0.5:
            raise ValueError(f"eps must lie in (0, 0.5), got {eps!r}")
        p = np.clip(p, eps, 1.0 - eps)
    elif ((p == 0.0) | (p == 1.0)).any():
        bad = int(np.count_nonzero((p == 0.0) | (p == 1.0)))
        raise ValueError(f"{bad} prediction(s) are exactly 0 or 1, whose logit is infinite; "
                         "pass eps to clip them into [eps, 1 - eps]")
    keep = w > 0
    y, p, w = y[keep], p[keep], w[keep]
    if not (np.any(y == 1.0) and np.any(y == 0.0)):
        raise ValueError("calibration slope and intercept need both labels 0 and 1 "
                         "(with positive weight)")
    z = logit(p)
    z0, z1 = z[y == 0.0], z[y == 1.0]
    # (quasi-)complete separation: the likelihood increases without bound along the slope
    if z0.max() <= z1.min() or z1.max() <= z0.min():
        raise ValueError("the calibration slope is infinite: the labels are separated by "
                         "logit(p) (every positive on one side of every negative)")
    return y, z, w


def calibration_slope_intercept(y, p, *, sample_weight=None, confidence: float = 0.95,
                                eps: float | None = None) -> CalibrationSlopeIntercept:
    """Calibration slope, joint-fit intercept and calibration-in-the-large with intervals.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}, both present.
    p : array-like of shape (n,)
        Predicted probabilities of the positive class, in (0, 1).
    sample_weight : array-like of shape (n,), optional
        Frequency weights.
    confidence : float, default=0.95
        Two-sided level of the intervals.
    eps : float, optional
        Clip ``p`` into ``[eps, 1 - eps]`` first; without it a prediction of exactly 0 or 1 is
        an error (its logit is infinite).

    Returns
    -------
    CalibrationSlopeIntercept

    Raises
    ------
    ValueError
        For one class only, 0/1 predictions without ``eps``, or labels separated by ``logit(p)``
        (the slope would be infinite).
    """
    from scipy.stats import chi2, norm

    if not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    y, z, w = _logit_inputs(y, p, sample_weight, eps)
    q = float(norm.ppf(0.5 + confidence / 2.0))
    drop = float(chi2.ppf(confidence, 1)) / 2.0

    alpha, beta = _fit_joint(z, y, w)
    info = _information(z, w, alpha, beta)
    det = info[0, 0] * info[1, 1] - info[0, 1] * info[1, 0]
    if not (np.isfinite(beta) and det > 0.0 and abs(beta) < 1e6):
        raise ValueError("the calibration slope is infinite: the labels are separated by "
                         "logit(p)")
    se_alpha = math.sqrt(info[1, 1] / det)
    se_beta = math.sqrt(info[0, 0] / det)
    ll_max = _loglik(alpha + beta * z, y, w)

    def slope_drop(b: float) -> float:
        a = _fit_offset_intercept(b * z, y, w, start=float(alpha))
        return ll_max - _loglik(a + b * z, y, w)

    cil = _fit_offset_intercept(z, y, w)
    mu = expit(cil + z)
    se_cil = 1.0 / math.sqrt(float(np.sum(w * mu * (1.0 - mu))))
    ll_cil = _loglik(cil + z, y, w)

    def cil_drop(a: float) -> float:
        return ll_cil - _loglik(a + z, y, w)

    return CalibrationSlopeIntercept(
        slope=float(beta), slope_se=se_beta,
        slope_wald=(float(beta - q * se_beta), float(beta + q * se_beta)),
        slope_profile=_profile_bounds(slope_drop, float(beta), se_beta, drop),
        intercept_with_slope=float(alpha), intercept_with_slope_se=se_alpha,
        intercept_with_slope_wald=(float(alpha - q * se_alpha), float(alpha + q * se_alpha)),
        calibration_intercept=float(cil), calibration_intercept_se=se_cil,
        calibration_intercept_wald=(float(cil - q * se_cil), float(cil + q * se_cil)),
        calibration_intercept_profile=_profile_bounds(cil_drop, float(cil), se_cil, drop),
        confidence=float(confidence))


# --------------------------------------------------------------------------- loess and ICI

def _qth_distance(x: np.ndarray, u: np.ndarray, cum: np.ndarray, q: int) -> np.ndarray:
    """Distance from each of ``x`` to its ``q``-th nearest row, the rows being the sorted
    distinct values ``u`` repeated (``cum`` = cumulative row counts). The ``q`` nearest rows are
    a window ``[l, l + q)`` of the sorted rows; ``l`` is found by a vectorised binary search on
    where the window's right reach overtakes its left reach."""
    n = int(cum[-1])

    def row(r):
        return u[np.searchsorted(cum, r, side="right")]

    lo = np.zeros(x.size, dtype=np.int64)
    hi = np.full(x.size, n - q + 1, dtype=np.int64)    # n - q + 1: "no window qualifies"
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        active = lo < hi
        m = np.minimum(mid, n - q)
        ok = (row(m + q - 1) - x) >= (x - row(m))
        hi = np.where(active & ok, mid, hi)
        lo = np.where(active & ~ok, mid + 1, lo)
    best = np.full(x.size, np.inf)
    has = lo <= n - q
    li = np.minimum(lo, n - q)
    best = np.where(has, row(li + q - 1) - x, best)
    prev = lo > 0
    pi = np.maximum(lo - 1, 0)
    best = np.where(prev, np.minimum(best, x - row(pi)), best)
    return np.maximum(best, 0.0)


def _loess_at(x: np.ndarray, u: np.ndarray, cnt: np.ndarray, ysum: np.ndarray, q: int,
              degree: int) -> np.ndarray:
    """Local polynomial fit at each of ``x`` over the distinct forecasts ``u`` (row counts
    ``cnt``, label sums ``ysum``), tricube weights over the ``q`` nearest rows."""
    dq_all = _qth_distance(x, u, np.cumsum(cnt.astype(np.int64)), q)
    out = np.empty(x.size)
    chunk = max(1, 1_000_000 // max(u.size, 1))
    idx = np.arange(degree + 1)
    for start in range(0, x.size, chunk):
        xc = x[start:start + chunk]
        dq = dq_all[start:start + chunk][:, None]
        diff = u[None, :] - xc[:, None]
        d = np.abs(diff)
        with np.errstate(divide="ignore", invalid="ignore"):
            # dq = 0 (the q nearest rows all sit at x): only those rows count
            t = np.where(dq > 0, d / dq, np.where(d == 0, 0.0, np.inf))
        kern = np.where(t < 1.0, (1.0 - t ** 3) ** 3, 0.0)
        v = diff / np.where(dq > 0, dq, 1.0)              # centred, scaled abscissa in [-1, 1]
        kc = kern * cnt[None, :]
        ky = kern * ysum[None, :]
        mom = np.empty((xc.size, 2 * degree + 1))
        rhs = np.empty((xc.size, degree + 1))
        vk = np.ones_like(v)
        for k in range(2 * degree + 1):
            mom[:, k] = np.sum(kc * vk, axis=1)
            if k <= degree:
                rhs[:, k] = np.sum(ky * vk, axis=1)
            vk = vk * v
        gram = mom[:, idx[:, None] + idx[None, :]]          # (m, d+1, d+1) Hankel moments
        coef = np.einsum("mij,mj->mi", np.linalg.pinv(gram, rcond=1e-12), rhs)
        out[start:start + chunk] = coef[:, 0]
    return out


def loess_calibration_curve(y, p, at=None, *, span: float = 0.75, degree: int = 2) -> np.ndarray:
    """The loess calibration curve ``s`` (fraction of positives smoothed against ``p``).

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p : array-like of shape (n,)
        Predicted probabilities.
    at : array-like, optional
        Where to evaluate ``s`` (default: at ``p``).
    span : float in (0, 1], default=0.75
        Fraction of the rows in each local fit (R's ``span``).
    degree : {1, 2}, default=2
        Degree of the local polynomial.

    Returns
    -------
    ndarray
        ``s`` at ``at``, evaluated exactly (R's ``surface = "direct"``).
    """
    y, p = check_binary_forecasts(y, p)
    if not (isinstance(span, (int, float)) and 0.0 < span <= 1.0):
        raise ValueError(f"span must lie in (0, 1], got {span!r}")
    if degree not in (1, 2):
        raise ValueError(f"degree must be 1 or 2, got {degree!r}")
    x = p if at is None else np.asarray(at, dtype=np.float64).reshape(-1)
    u, inverse = np.unique(p, return_inverse=True)
    cnt = np.bincount(inverse, minlength=u.size).astype(np.float64)
    ysum = np.bincount(inverse, weights=y, minlength=u.size)
    q = max(int(math.floor(span * p.size)), 1)
    return _loess_at(x, u, cnt, ysum, q, degree)


@dataclass(frozen=True)
class IntegratedCalibrationIndex:
    """Summaries of ``|p - s(p)|`` over the rows (Austin & Steyerberg 2019)."""

    ici: float
    e50: float
    e90: float
    emax: float

    def as_dict(self) -> dict:
        """Plain-JSON form."""
        return dict(self.__dict__)


def integrated_calibration_index(y, p, *, span: float = 0.75,
                                 degree: int = 2) -> IntegratedCalibrationIndex:
    """ICI, E50, E90 and Emax of the loess calibration curve (see the module docstring).

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p : array-like of shape (n,)
        Predicted probabilities of the positive class.
    span, degree
        Loess settings, as in :func:`loess_calibration_curve`.

    Returns
    -------
    IntegratedCalibrationIndex
        E50 is the median and E90 the 90th percentile with linear interpolation between order
        statistics (``numpy.quantile``'s default, R's type 7).
    """
    y, p = check_binary_forecasts(y, p)
    u = np.unique(p)
    if u.size <= EXACT_CURVE_POINTS:
        s_u = loess_calibration_curve(y, p, u, span=span, degree=degree)
    else:
        knots = np.unique(np.quantile(p, np.linspace(0.0, 1.0, EXACT_CURVE_POINTS)))
        s_u = np.interp(u, knots, loess_calibration_curve(y, p, knots, span=span,
                                                          degree=degree))
    err = np.abs(p - s_u[np.searchsorted(u, p)])
    return IntegratedCalibrationIndex(float(np.mean(err)), float(np.median(err)),
                                      float(np.quantile(err, 0.9)), float(np.max(err)))


def top_label_ici(y, p, *, span: float = 0.75, degree: int = 2) -> IntegratedCalibrationIndex:
    """:func:`integrated_calibration_index` of the top-label confidence against correctness
    for class indices ``y`` and an (n, K) probability matrix ``p``."""
    from mlcal.metrics.decomposition import top_label_events

    correct, conf = top_label_events(y, p)
    return integrated_calibration_index(correct, conf, span=span, degree=degree)


def classwise_ici(y, p, *, span: float = 0.75, degree: int = 2) -> list[IntegratedCalibrationIndex]:
    """One-vs-rest :func:`integrated_calibration_index` of every class (column) of ``p``."""
    from mlcal.metrics.decomposition import class_indices_and_matrix

    yi, prob = class_indices_and_matrix(y, p)
    return [integrated_calibration_index((yi == k).astype(np.float64), prob[:, k], span=span,
                                         degree=degree) for k in range(prob.shape[1])]
