"""Calibration metrics for multiclass probabilities (an (n, K) matrix whose rows sum to 1).

* :func:`top_label_ece` -- the binary ECE of the top-label confidence ``max_k p_ik`` against
  whether the top label is right (Guo et al. 2017's "confidence ECE"); ties pick the first
  class, as ``argmax`` does.
* :func:`classwise_ece` -- the mean over classes of the binary ECE of column ``k`` against
  ``y == k`` (Kull et al. 2019).
* :func:`multiclass_brier` -- ``mean_i sum_k (p_ik - [y_i = k])^2``, in [0, 2].
* :func:`multiclass_log_loss` -- ``-mean_i log p_{i, y_i}``, with ``p`` clipped at ``eps``.

Binning (``n_bins``, ``strategy``) is that of :func:`mlcal.metrics.ece`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mlcal.calibrators.multiclass import check_probability_rows
from mlcal.metrics.binary import ece
from mlcal.maps.multiclass import as_score_matrix


def _check(y, p) -> tuple[np.ndarray, np.ndarray]:
    """Class indices and a probability matrix, or ``ValueError`` naming the problem."""
    arr = np.asarray(p, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError(f"predicted probabilities must be an (n, K) matrix with K >= 2, got "
                         f"shape {arr.shape}")
    prob = as_score_matrix(arr, arr.shape[1], name="predicted probabilities")
    check_probability_rows(prob, name="predicted probabilities")
    raw = np.asarray(y).reshape(-1)
    if raw.shape[0] != prob.shape[0]:
        raise ValueError(f"length mismatch: {prob.shape[0]} probability rows but "
                         f"{raw.shape[0]} labels")
    if raw.dtype.kind not in "iub" and not (raw.dtype.kind == "f" and np.all(raw == np.round(raw))):
        raise ValueError(f"labels must be class indices 0..{prob.shape[1] - 1}, got dtype "
                         f"{raw.dtype}")
    yi = raw.astype(np.int64)
    if yi.min() < 0 or yi.max() >= prob.shape[1]:
        raise ValueError(f"labels must be class indices 0..{prob.shape[1] - 1}; found "
                         f"{np.unique(yi[(yi < 0) | (yi >= prob.shape[1])])[:5].tolist()}")
    return yi, prob


def top_label_ece(y, p, n_bins: int = 15, strategy: str = "uniform") -> float:
    """Top-label (confidence) ECE.

    Parameters
    ----------
    y : array-like of shape (n,)
        Class indices in ``0 .. K-1``.
    p : array-like of shape (n, K)
        Predicted class probabilities (rows sum to 1).
    n_bins : int, default=15
    strategy : {"uniform", "quantile"}, default="uniform"
    """
    yi, prob = _check(y, p)
    top = np.argmax(prob, axis=1)
    conf = prob[np.arange(prob.shape[0]), top]
    return ece((top == yi).astype(np.float64), conf, n_bins, strategy)


def classwise_ece(y, p, n_bins: int = 15, strategy: str = "uniform") -> float:
    """Class-wise ECE: the mean over the K classes of the one-vs-rest binary ECE.

    Parameters as in :func:`top_label_ece`.
    """
    per_class = per_class_ece(y, p, n_bins, strategy)
    return float(np.sum(np.asarray(per_class)) / len(per_class))


def multiclass_brier_per_row(y, p) -> np.ndarray:
    """Each row's ``sum_k (p_ik - [y_i = k])^2``; :func:`multiclass_brier` is their mean."""
    yi, prob = _check(y, p)
    d = prob.copy()
    d[np.arange(prob.shape[0]), yi] -= 1.0
    return np.sum(d * d, axis=1)


def multiclass_brier(y, p) -> float:
    """Multiclass Brier score ``mean_i sum_k (p_ik - [y_i = k])^2`` (0 is perfect, 2 worst)."""
    return float(np.mean(multiclass_brier_per_row(y, p)))


def multiclass_log_loss_per_row(y, p, eps: float = 1e-15) -> np.ndarray:
    """Each row's ``-log p_{i, y_i}`` (clipped at ``eps``); :func:`multiclass_log_loss` is
    their mean."""
    yi, prob = _check(y, p)
    return -np.log(np.clip(prob[np.arange(prob.shape[0]), yi], eps, 1.0))


def multiclass_log_loss(y, p, eps: float = 1e-15) -> float:
    """Mean negative log-likelihood of the true class, its probability clipped to
    ``[eps, 1]`` so a zero stays finite."""
    return float(np.mean(multiclass_log_loss_per_row(y, p, eps)))


def multiclass_accuracy(y, p) -> float:
    """Fraction of rows whose highest-probability class (first on ties) is the true one."""
    yi, prob = _check(y, p)
    return float(np.mean(np.argmax(prob, axis=1) == yi))


#: the multiclass metrics of :func:`multiclass_metrics`, each with whether higher is better.
#: ``log_loss`` and ``accuracy`` mean what they mean for a binary model (the negative
#: log-likelihood of the true class; the fraction predicted right) and keep those names; the
#: binary ``ece`` and ``brier`` have no multiclass equivalent of the same value, hence
#: ``top_label_ece``/``classwise_ece`` and ``multiclass_brier`` (summed over the K classes).
MULTICLASS_METRIC_NAMES = {"top_label_ece": False, "classwise_ece": False,
                           "multiclass_brier": False, "log_loss": False, "accuracy": True}


def multiclass_metrics(y, p, n_bins: int = 15, strategy: str = "uniform") -> dict[str, float]:
    """Every metric of :data:`MULTICLASS_METRIC_NAMES` for class indices ``y`` and an (n, K)
    probability matrix ``p``."""
    return {"top_label_ece": top_label_ece(y, p, n_bins, strategy),
            "classwise_ece": classwise_ece(y, p, n_bins, strategy),
            "multiclass_brier": multiclass_brier(y, p),
            "log_loss": multiclass_log_loss(y, p),
            "accuracy": multiclass_accuracy(y, p)}


def per_class_ece(y, p, n_bins: int = 15, strategy: str = "uniform") -> list[float]:
    """The one-vs-rest binary ECE of each class (their mean is :func:`classwise_ece`)."""
    yi, prob = _check(y, p)
    return [ece((yi == k).astype(np.float64), prob[:, k], n_bins, strategy)
            for k in range(prob.shape[1])]


def multiclass_report(y, p_before, p_after, *, classes: Sequence | None = None,
                      n_bins: int = 15, strategy: str = "uniform") -> dict[str, Any]:
    """The multiclass metrics before and after calibration, their improvement and per-class
    details, in the layout of :func:`mlcal.metrics.calibration_report` (so
    :func:`mlcal.metrics.format_report` prints it).

    Parameters
    ----------
    y : array-like of shape (n,)
        Class indices in ``0 .. K-1``.
    p_before, p_after : array-like of shape (n, K)
        Probability rows before and after calibration.
    classes : sequence of K labels, optional
        Names of the classes in the per-class details (default ``0 .. K-1``).
    n_bins, strategy
        Binning of the ECEs.

    Returns
    -------
    dict
        ``before``/``after``/``improvement`` (improvement is ``before - after`` for losses,
        ``after - before`` for accuracy), ``per_class`` (count and one-vs-rest ECE before and
        after), ``n``, ``n_classes``, ``classes``, ``n_bins``, ``strategy``.
    """
    yi, _ = _check(y, p_before)
    K = np.shape(p_before)[1]
    if np.shape(p_after) != np.shape(p_before):
        raise ValueError(f"p_before has shape {np.shape(p_before)} but p_after "
                         f"{np.shape(p_after)}")
    names = list(range(K)) if classes is None else np.asarray(classes).tolist()
    before = multiclass_metrics(yi, p_before, n_bins, strategy)
    after = multiclass_metrics(yi, p_after, n_bins, strategy)
    improvement = {m: (after[m] - before[m]) if higher else (before[m] - after[m])
                   for m, higher in MULTICLASS_METRIC_NAMES.items()}
    counts = np.bincount(yi, minlength=K)
    per_class = [{"class": c, "count": int(n), "ece_before": b, "ece_after": a}
                 for c, n, b, a in zip(names, counts, per_class_ece(yi, p_before, n_bins, strategy),
                                       per_class_ece(yi, p_after, n_bins, strategy))]
    return {"n": int(yi.size), "n_classes": K, "classes": names, "n_bins": n_bins,
            "strategy": strategy, "before": before, "after": after,
            "improvement": improvement, "per_class": per_class}
