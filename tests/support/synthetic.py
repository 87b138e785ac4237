"""Synthetic calibration sets shared by the tests: scores, labels drawn from a known link, and
optional ties and weights. Every draw comes from one seeded generator in a fixed order (scores,
then labels, then weights), so a data set is reproducible from its arguments alone."""

from __future__ import annotations

import numpy as np


def calibration_set(n: int, seed: int = 0, *, beta: tuple[float, float] | None = None,
                    power: float = 1.0, decimals: int | None = None, link_power: float = 1.0,
                    weights: str | None = None):
    """Scores, 0/1 labels with ``P(y = 1 | s) = s ** link_power`` and (optionally) weights.

    Parameters
    ----------
    n, seed
        Size and seed of ``numpy.random.default_rng``.
    beta : (a, b), optional
        Scores ``Beta(a, b)``; otherwise ``U(0, 1) ** power``.
    decimals : int, optional
        Round the scores (ties).
    link_power : float
        Miscalibration of the labels: ``y ~ Bernoulli(s ** link_power)``.
    weights : {None, "unit", "integer", "fractional"}
        No weights (return two arrays), ones, integers 1..3, or uniform in [0.1, 3).
    """
    rng = np.random.default_rng(seed)
    s = rng.beta(*beta, n) if beta is not None else rng.random(n) ** power
    if decimals is not None:
        s = np.round(s, decimals)
    y = (rng.random(n) < np.clip(s, 0.0, 1.0) ** link_power).astype(float)
    if weights is None:
        return s, y
    if weights == "unit":
        w = np.ones(n)
    elif weights == "integer":
        w = rng.integers(1, 4, n).astype(float)
    elif weights == "fractional":
        w = rng.uniform(0.1, 3.0, n)
    else:
        raise ValueError(f"unknown weights {weights!r}")
    return s, y, w


def beta_link_set(n: int, seed: int = 0, *, a: float, b: float, c: float,
                  beta: tuple[float, float] = (1.0, 1.0), weights: bool = False):
    """Scores ``Beta(*beta)`` and labels with ``P(y = 1 | s) = expit(a ln s - b ln(1 - s) + c)``
    (the beta-calibration link; ``a`` or ``b`` < 0 makes a non-monotone truth), plus integer
    weights 1..3 if ``weights``."""
    rng = np.random.default_rng(seed)
    s = rng.beta(*beta, n)
    with np.errstate(divide="ignore"):
        z = a * np.log(s) - b * np.log1p(-s) + c
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-z))).astype(float)
    if not weights:
        return s, y
    return s, y, rng.integers(1, 4, n).astype(float)


def multiclass_set(n: int, n_classes: int = 4, seed: int = 0, *, scale: float = 2.0,
                   true_t: float = 0.5):
    """Logits ``z`` (n, K), their softmax probabilities and class indices drawn from
    ``softmax(true_t * z)`` (miscalibrated unless ``true_t == 1``)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, n_classes)) * scale + rng.normal(size=n_classes)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    proba = e / e.sum(axis=1, keepdims=True)
    t = np.exp(true_t * (z - z.max(axis=1, keepdims=True)))
    t /= t.sum(axis=1, keepdims=True)
    u = rng.uniform(size=(n, 1))
    y = np.minimum((u > np.cumsum(t, axis=1)).sum(axis=1), n_classes - 1)
    return z, proba, y
