"""Reliability diagrams of a multiclass model: one per class (one-vs-rest) and the top-label
(confidence) diagram, each drawn by :func:`mlcal.plotting.reliability_diagram` so that every
bin shows its count and confidence interval (small classes have few positives; the intervals
say how little a bin then shows).

* class ``k``: the predicted probability of class ``k`` against ``y == k``;
* top label: the highest predicted probability against whether that class is right (Guo et al.
  2017). The top label can change under calibration, so its uncalibrated and calibrated
  diagrams are two figures (their "correct" indicators differ).
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from mlcal.multiclass_metrics import _check
from mlcal.plotting import reliability_diagram


def _file_safe(label) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(label))[:40] or "_"


def _top_label(yi: np.ndarray, prob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    top = np.argmax(prob, axis=1)
    return (top == yi).astype(np.float64), prob[np.arange(prob.shape[0]), top]


def plot_multiclass_reliability(y, p_before, p_after=None, *, classes: Sequence | None = None,
                                n_bins: int = 10, strategy: str = "uniform",
                                interval: str | None = "wilson", confidence: float = 0.95,
                                path_prefix: str | None = None) -> dict:
    """Per-class and top-label reliability diagrams of an (n, K) probability matrix.

    Parameters
    ----------
    y : array-like of shape (n,)
        Class indices in ``0 .. K-1``.
    p_before : array-like of shape (n, K)
        Predicted probabilities (before calibration when ``p_after`` is given).
    p_after : array-like of shape (n, K), optional
        Calibrated probabilities, overlaid on each per-class diagram.
    classes : sequence of K labels, optional
        Class names for titles and names (default ``0 .. K-1``).
    n_bins, strategy, interval, confidence
        As in :func:`mlcal.plotting.reliability_diagram`.
    path_prefix : str, optional
        Write each figure as ``<path_prefix><name>.png``.

    Returns
    -------
    dict of str to matplotlib.figure.Figure
        ``"class<k>_<label>"`` for each class k (the index keeps names distinct whatever the
        labels are), ``"top_label"`` (the calibrated model's, or the only one) and
        ``"top_label_uncalibrated"`` when ``p_after`` is given.
    """
    yi, before = _check(y, p_before)
    after = None if p_after is None else _check(yi, p_after)[1]
    if after is not None and after.shape != before.shape:
        raise ValueError(f"p_before has shape {before.shape} but p_after {after.shape}")
    K = before.shape[1]
    names = list(range(K)) if classes is None else list(np.asarray(classes, dtype=object))
    if len(names) != K:
        raise ValueError(f"{len(names)} class names for {K} probability columns")
    opts = {"n_bins": n_bins, "strategy": strategy, "interval": interval,
            "confidence": confidence}

    def draw(name, *args, **kw):
        path = None if path_prefix is None else f"{path_prefix}{name}.png"
        figures[name] = reliability_diagram(*args, path=path, **opts, **kw)

    figures: dict = {}
    for k, label in enumerate(names):
        y_k = (yi == k).astype(np.float64)
        title = (f"class {label!s} vs rest: {int(y_k.sum())} of {yi.size} rows "
                 f"({n_bins} {strategy} bins; numbers = items per bin)")
        draw(f"class{k}_{_file_safe(label)}", y_k, before[:, k],
             None if after is None else after[:, k], title=title)
    for name, prob, legend in ((("top_label", before, "uncalibrated"),) if after is None else
                               (("top_label", after, "calibrated"),
                                ("top_label_uncalibrated", before, "uncalibrated"))):
        correct, conf = _top_label(yi, prob)
        draw(name, correct, conf, labels=(legend,),
             title=f"top-label confidence, {legend} ({n_bins} {strategy} bins; y = fraction "
                   "correct)")
    return figures
