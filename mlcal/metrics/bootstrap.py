"""Bootstrap confidence intervals for any metric, single or paired.

Rows are resampled with replacement (seeded, so a result can be reproduced). A paired bootstrap
applies the same resampled rows to two predictors, so the interval of their difference reflects
only how the two differ on the data, not the noise both share.

Two interval methods, with ``theta`` the metric on the data and ``theta*`` its bootstrap
replicates (quantiles ``q_a`` at level ``a``):

* ``"percentile"`` (default): ``[q_(a/2), q_(1-a/2)]`` of ``theta*``.
* ``"basic"`` (bias-corrected): ``[2 theta - q_(1-a/2), 2 theta - q_(a/2)]``, the percentile
  interval reflected about ``theta`` (Davison & Hinkley 1997, sec. 5.2). A calibration error is
  biased upwards (noise adds to every bin's gap), and its replicates are biased upwards again
  relative to ``theta``, so the percentile interval sits about twice the bias too high and on a
  perfectly calibrated model usually excludes 0. Reflecting removes the bias to first order: the
  interval is centred near the bias-corrected estimate ``2 theta - mean(theta*)``, which every
  :class:`Interval` reports as ``bias_corrected``, and its lower end may be negative (read that
  as "consistent with 0"; it is not clipped). BCa was not chosen: its bounds are quantiles of
  ``theta*`` and so never go below the smallest replicate, which for a non-negative error on a
  calibrated model is above 0 -- the very defect being corrected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from mlcal._validation import as_labels, as_weights, check_probabilities

#: Resamples used when none are given: enough for stable 95% percentile bounds (the bounds'
#: Monte Carlo error is well under their sampling error at this size).
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0

Metric = Callable[..., float]
#: bootstrap interval methods; "basic" is the bias-corrected one (see the module docstring)
BOOTSTRAP_METHODS = ("percentile", "basic")


@dataclass(frozen=True)
class Interval:
    """A point estimate with its two-sided bootstrap interval.

    ``estimate`` is the metric on the full data, ``bias_corrected`` the bootstrap bias-corrected
    estimate ``2 estimate - mean(replicates)``, ``method`` the interval's method.
    """

    estimate: float
    lower: float
    upper: float
    confidence: float
    n_resamples: int
    seed: int
    method: str = "percentile"
    bias_corrected: float = float("nan")

    def as_dict(self) -> dict:
        """Plain-JSON form."""
        return {"estimate": self.estimate, "lower": self.lower, "upper": self.upper,
                "confidence": self.confidence, "n_resamples": self.n_resamples,
                "seed": self.seed, "method": self.method,
                "bias_corrected": self.bias_corrected}


def _check_confidence(confidence: float) -> float:
    if not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    return float(confidence)


def _replicates(stat: Callable[[np.ndarray], float], n: int, n_resamples: int,
                seed: int) -> np.ndarray:
    """``stat(idx)`` over ``n_resamples`` resampled index sets. A resample on which the statistic
    is undefined (e.g. AUC of a resample holding one class) is drawn again; if that keeps
    happening the data are too small for a bootstrap and ``ValueError`` is raised."""
    return _counted_replicates(stat, n, n_resamples, seed)[0]


def _counted_replicates(stat: Callable[[np.ndarray], float], n: int, n_resamples: int,
                        seed: int) -> tuple[np.ndarray, int]:
    """:func:`_replicates` and the number of resamples drawn again (0: the i-th replicate is
    the statistic on the i-th index set the seed draws)."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) \
            or n_resamples < 10:
        raise ValueError(f"n_resamples must be an integer >= 10, got {n_resamples!r}")
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    failures = 0
    i = 0
    while i < n_resamples:
        idx = rng.integers(0, n, n)
        try:
            out[i] = stat(idx)
        except ValueError:
            failures += 1
            if failures > max(10, n_resamples // 10):
                raise ValueError("the metric is undefined on too many bootstrap resamples "
                                 "(e.g. a single class); use more data") from None
            continue
        i += 1
    return out, failures


def _check_method(method: str) -> str:
    if method not in BOOTSTRAP_METHODS:
        raise ValueError(f"method must be one of {BOOTSTRAP_METHODS}, got {method!r}")
    return method


def _interval(estimate: float, reps: np.ndarray, confidence: float, n_resamples: int,
              seed: int, method: str = "percentile") -> Interval:
    alpha = 1.0 - confidence
    lo, hi = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    if method == "basic":
        lo, hi = 2.0 * estimate - hi, 2.0 * estimate - lo
    # np.sum (pairwise, fixed order) rather than a BLAS dot, so the result has the same bits
    bias_corrected = 2.0 * estimate - float(np.sum(reps)) / reps.size
    return Interval(float(estimate), float(lo), float(hi), confidence, int(n_resamples), seed,
                    method, float(bias_corrected))


def _rows(y, p, sample_weight, name: str = "predicted probabilities"):
    """Validated (y, p, w or None): binary labels and probabilities for a 1-D ``p``; for an
    (n, K) ``p`` (multiclass) only the shapes are checked here -- the metric checks the rest."""
    arr = np.asarray(p)
    if arr.ndim == 2 and arr.shape[1] >= 2:
        prob = np.asarray(arr, dtype=np.float64)
        labels = np.asarray(y).reshape(-1)
        if labels.shape[0] != prob.shape[0]:
            raise ValueError(f"length mismatch: {prob.shape[0]} probability rows but "
                             f"{labels.shape[0]} labels")
    else:
        prob = check_probabilities(p, name=name)
        labels = as_labels(y, prob.shape[0])
    w = None if sample_weight is None else as_weights(sample_weight, prob.shape[0])
    return labels, prob, w


def bootstrap_ci(metric: Metric, y, p, *, confidence: float = 0.95,
                 n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                 method: str = "percentile", sample_weight=None) -> Interval:
    """Bootstrap interval of ``metric(y, p)`` (``metric(y, p, w)`` with sample weights).

    Parameters
    ----------
    metric : callable (y, p) -> float, or (y, p, w) -> float with ``sample_weight``
        Any metric of :mod:`mlcal.metrics` or one of your own.
    y : array-like of shape (n,)
        Labels in {0, 1} (class indices for a multiclass ``p``).
    p : array-like of shape (n,) or (n, K)
        Predicted probabilities of the positive class, or class probability rows.
    confidence : float, default=0.95
        Two-sided coverage of the interval.
    n_resamples : int, default=DEFAULT_RESAMPLES
    seed : int, default=DEFAULT_SEED
    method : {"percentile", "basic"}, default="percentile"
        ``"basic"`` is the bias-corrected interval; see the module docstring for why it, and not
        the percentile interval, belongs with a calibration error.
    sample_weight : array-like of shape (n,), optional
        Row weights, resampled with their rows and passed as the metric's third argument.

    Returns
    -------
    Interval
        ``estimate`` is the metric on the full data, ``lower``/``upper`` the bounds,
        ``bias_corrected`` the bootstrap bias-corrected estimate.
    """
    return _bootstrap(metric, y, p, confidence, n_resamples, seed, method, sample_weight)[0]


def _bootstrap(metric: Metric, y, p, confidence: float, n_resamples: int, seed: int,
               method: str, sample_weight=None) -> tuple[Interval, float, np.ndarray, int]:
    """:func:`bootstrap_ci`'s interval, with the estimate, the replicates and the number of
    resamples drawn again (0: replicate i is the statistic on the i-th index set the seed
    draws, so replicates of two metrics on the same rows and seed are paired)."""
    confidence = _check_confidence(confidence)
    method = _check_method(method)
    y, p, w = _rows(y, p, sample_weight)
    if w is None:
        def stat(idx):
            return metric(y[idx], p[idx])
        estimate = metric(y, p)
    else:
        def stat(idx):
            return metric(y[idx], p[idx], w[idx])
        estimate = metric(y, p, w)
    reps, failures = _counted_replicates(stat, p.shape[0], n_resamples, seed)
    return (_interval(estimate, reps, confidence, n_resamples, seed, method), estimate, reps,
            failures)


def paired_bootstrap_diff(metric: Metric, y, p_a, p_b, *, confidence: float = 0.95,
                          n_resamples: int = DEFAULT_RESAMPLES,
                          seed: int = DEFAULT_SEED, method: str = "percentile") -> Interval:
    """Bootstrap interval of ``metric(y, p_a) - metric(y, p_b)`` on paired rows.

    Each resample draws one set of rows and scores both predictors on it, so the interval is
    that of the difference on the same data. ``method`` as in :func:`bootstrap_ci`.
    """
    confidence = _check_confidence(confidence)
    method = _check_method(method)
    p_a = check_probabilities(p_a, name="predicted probabilities")
    p_b = check_probabilities(p_b, name="predicted probabilities")
    if p_a.size != p_b.size:
        raise ValueError(f"length mismatch: {p_a.size} and {p_b.size} predictions")
    y = as_labels(y, p_a.size)
    reps = _replicates(lambda idx: metric(y[idx], p_a[idx]) - metric(y[idx], p_b[idx]),
                       p_a.size, n_resamples, seed)
    return _interval(metric(y, p_a) - metric(y, p_b), reps, confidence, n_resamples, seed,
                     method)
