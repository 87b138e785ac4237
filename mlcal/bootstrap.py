"""Percentile bootstrap confidence intervals for any metric, single or paired.

Rows are resampled with replacement (seeded, so a result can be reproduced). A paired bootstrap
applies the same resampled rows to two predictors, so the interval of their difference reflects
only how the two differ on the data, not the noise both share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from mlcal._validation import as_labels, check_probabilities

#: Resamples used when none are given: enough for stable 95% percentile bounds (the bounds'
#: Monte Carlo error is well under their sampling error at this size).
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0

Metric = Callable[[np.ndarray, np.ndarray], float]


@dataclass(frozen=True)
class Interval:
    """A point estimate with its two-sided percentile bootstrap interval."""

    estimate: float
    lower: float
    upper: float
    confidence: float
    n_resamples: int
    seed: int

    def as_dict(self) -> dict:
        """Plain-JSON form."""
        return {"estimate": self.estimate, "lower": self.lower, "upper": self.upper,
                "confidence": self.confidence, "n_resamples": self.n_resamples,
                "seed": self.seed}


def _check_confidence(confidence: float) -> float:
    if not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    return float(confidence)


def _replicates(stat: Callable[[np.ndarray], float], n: int, n_resamples: int,
                seed: int) -> np.ndarray:
    """``stat(idx)`` over ``n_resamples`` resampled index sets. A resample on which the statistic
    is undefined (e.g. AUC of a resample holding one class) is drawn again; if that keeps
    happening the data are too small for a bootstrap and ``ValueError`` is raised."""
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
    return out


def _interval(estimate: float, reps: np.ndarray, confidence: float, n_resamples: int,
              seed: int) -> Interval:
    alpha = 1.0 - confidence
    lo, hi = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Interval(float(estimate), float(lo), float(hi), confidence, int(n_resamples), seed)


def bootstrap_ci(metric: Metric, y, p, *, confidence: float = 0.95,
                 n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> Interval:
    """Percentile bootstrap interval of ``metric(y, p)``.

    Parameters
    ----------
    metric : callable (y, p) -> float
        Any metric of :mod:`mlcal.metrics` or one of your own.
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p : array-like of shape (n,)
        Predicted probabilities of the positive class.
    confidence : float, default=0.95
        Two-sided coverage of the interval.
    n_resamples : int, default=DEFAULT_RESAMPLES
    seed : int, default=DEFAULT_SEED

    Returns
    -------
    Interval
        ``estimate`` is the metric on the full data; ``lower``/``upper`` the percentile bounds.
    """
    confidence = _check_confidence(confidence)
    p = check_probabilities(p, name="predicted probabilities")
    y = as_labels(y, p.size)
    reps = _replicates(lambda idx: metric(y[idx], p[idx]), p.size, n_resamples, seed)
    return _interval(metric(y, p), reps, confidence, n_resamples, seed)


def paired_bootstrap_diff(metric: Metric, y, p_a, p_b, *, confidence: float = 0.95,
                          n_resamples: int = DEFAULT_RESAMPLES,
                          seed: int = DEFAULT_SEED) -> Interval:
    """Percentile bootstrap interval of ``metric(y, p_a) - metric(y, p_b)`` on paired rows.

    Each resample draws one set of rows and scores both predictors on it, so the interval is
    that of the difference on the same data.
    """
    confidence = _check_confidence(confidence)
    p_a = check_probabilities(p_a, name="predicted probabilities")
    p_b = check_probabilities(p_b, name="predicted probabilities")
    if p_a.size != p_b.size:
        raise ValueError(f"length mismatch: {p_a.size} and {p_b.size} predictions")
    y = as_labels(y, p_a.size)
    reps = _replicates(lambda idx: metric(y[idx], p_a[idx]) - metric(y[idx], p_b[idx]),
                       p_a.size, n_resamples, seed)
    return _interval(metric(y, p_a) - metric(y, p_b), reps, confidence, n_resamples, seed)
