"""Calibration and discrimination metrics for binary classifiers.

ECE and MCE follow Naeini et al.: bin the predicted probability of the positive class, compare
each bin's mean prediction ``e_k`` with its fraction of positives ``o_k``::

    ECE = sum_k (n_k / N) |o_k - e_k|        MCE = max_k |o_k - e_k|

Two binnings are offered:

* ``strategy="uniform"`` (default): ``n_bins`` equal-width bins [i/K, (i+1)/K), the last one
  closed; empty bins add nothing to ECE and are skipped by MCE. This is what the papers' text
  states.
* ``strategy="quantile"``: equal-count bins over the predictions sorted by (prediction, then label
  ascending); with r = N mod K the first r bins get one extra item. This is what the authors' code
  (``getECE.m``/``getMCE.m``) computed for every published table, so use it to compare with the
  BBQ/SBB/ABB/ENIR/ELiTE papers.

``auc`` is the plain ROC AUC (the authors' code reports max(AUC, 1 - AUC)).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlcal._validation import as_labels, check_probabilities

METRIC_NAMES = ("ece", "mce", "brier", "rmse", "log_loss", "auc", "accuracy")
# metrics where a larger value is better; for the rest smaller is better
HIGHER_IS_BETTER = frozenset({"auc", "accuracy"})
BIN_STRATEGIES = ("uniform", "quantile")


def _check(y, p) -> tuple[np.ndarray, np.ndarray]:
    prob = check_probabilities(p, name="predicted probabilities")
    return as_labels(y, prob.shape[0]), prob


def _bin_ids(y: np.ndarray, p: np.ndarray, n_bins: int, strategy: str):
    """Return (y, p, bin id per item, number of bins), possibly reordered for quantile bins."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if strategy == "uniform":
        return y, p, np.minimum((p * n_bins).astype(np.int64), n_bins - 1), n_bins
    if strategy == "quantile":
        order = np.lexsort((y, p))  # by prediction, ties broken by label ascending (authors' code)
        n = p.shape[0]
        k = min(n, n_bins)
        size, rest = divmod(n, k)
        sizes = np.full(k, size)
        sizes[:rest] += 1
        return y[order], p[order], np.repeat(np.arange(k), sizes), k
    raise ValueError(f"strategy must be one of {BIN_STRATEGIES}, got {strategy!r}")


def reliability_curve(y, p, n_bins: int = 10, strategy: str = "uniform") -> dict[str, np.ndarray]:
    """Per-bin statistics behind a reliability diagram (non-empty bins only).

    Returns
    -------
    dict with arrays ``mean_predicted`` (e_k), ``fraction_positive`` (o_k), ``count`` (n_k),
    ``lower`` and ``upper`` (the bin's prediction range: the fixed edges for uniform bins, the
    smallest and largest prediction for quantile bins).
    """
    y, p = _check(y, p)
    y, p, ids, k = _bin_ids(y, p, n_bins, strategy)
    count = np.bincount(ids, minlength=k).astype(np.float64)
    sum_p = np.bincount(ids, weights=p, minlength=k)
    sum_y = np.bincount(ids, weights=y, minlength=k)
    nz = count > 0
    if strategy == "uniform":
        lower = np.arange(k) / k
        upper = (np.arange(k) + 1) / k
    else:
        lower = np.full(k, np.inf)
        upper = np.full(k, -np.inf)
        np.minimum.at(lower, ids, p)
        np.maximum.at(upper, ids, p)
    return {"mean_predicted": sum_p[nz] / count[nz], "fraction_positive": sum_y[nz] / count[nz],
            "count": count[nz], "lower": lower[nz], "upper": upper[nz]}


def ece(y, p, n_bins: int = 10, strategy: str = "uniform") -> float:
    """Expected calibration error: sum over bins of (n_k/N)|o_k - e_k|.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p : array-like of shape (n,)
        Predicted probabilities of the positive class.
    n_bins : int, default=10
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins (the papers' stated definition) or equal-count bins (what the authors'
        code used for their published numbers); see the module docstring.
    """
    c = reliability_curve(y, p, n_bins, strategy)
    gap = np.abs(c["fraction_positive"] - c["mean_predicted"])
    return float(np.dot(c["count"], gap) / c["count"].sum())


def mce(y, p, n_bins: int = 10, strategy: str = "uniform") -> float:
    """Maximum calibration error: max over non-empty bins of |o_k - e_k|; see :func:`ece`."""
    c = reliability_curve(y, p, n_bins, strategy)
    return float(np.max(np.abs(c["fraction_positive"] - c["mean_predicted"])))


def brier(y, p) -> float:
    """Brier score, mean((y - p)^2)."""
    y, p = _check(y, p)
    return float(np.mean((y - p) ** 2))


def rmse(y, p) -> float:
    """Root mean squared error, sqrt(Brier), as reported in the calibration papers."""
    return float(np.sqrt(brier(y, p)))


def log_loss(y, p, eps: float = 1e-15) -> float:
    """Mean negative log-likelihood, with p clipped to [eps, 1 - eps] so 0/1 predictions stay finite."""
    y, p = _check(y, p)
    q = np.clip(p, eps, 1.0 - eps)
    return float(-np.mean(y * np.log(q) + (1.0 - y) * np.log1p(-q)))


def auc(y, p) -> float:
    """Area under the ROC curve (Mann-Whitney statistic, tied predictions count one half).

    Raises ``ValueError`` when ``y`` has a single class. Unlike the papers' code this is not
    folded to max(AUC, 1 - AUC).
    """
    from scipy.stats import rankdata

    y, p = _check(y, p)
    n_pos = float(y.sum())
    n_neg = y.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC is undefined when y contains a single class")
    ranks = rankdata(p)  # average ranks for ties
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def accuracy(y, p, threshold: float = 0.5) -> float:
    """Fraction of correct labels when p >= threshold predicts class 1."""
    y, p = _check(y, p)
    return float(np.mean((p >= threshold) == (y == 1)))


def compute_all(y, p, n_bins: int = 10, strategy: str = "uniform") -> dict[str, float]:
    """Every metric of :data:`METRIC_NAMES` for one set of predictions (AUC is NaN for one class)."""
    y, p = _check(y, p)
    out = {"ece": ece(y, p, n_bins, strategy), "mce": mce(y, p, n_bins, strategy),
           "brier": brier(y, p), "rmse": rmse(y, p), "log_loss": log_loss(y, p)}
    out["auc"] = auc(y, p) if 0 < y.sum() < y.size else float("nan")
    out["accuracy"] = accuracy(y, p)
    return out


def calibration_report(y, p_before, p_after, n_bins: int = 10,
                       strategy: str = "uniform") -> dict[str, Any]:
    """All metrics before and after calibration, and the improvement.

    ``improvement[m]`` is positive when calibration helped: ``before - after`` for the metrics
    where lower is better (ECE, MCE, Brier, RMSE, log loss) and ``after - before`` for AUC and
    accuracy.

    Returns
    -------
    dict with keys ``"before"``, ``"after"``, ``"improvement"`` (each metric name -> float),
    ``"n"``, ``"n_bins"`` and ``"strategy"``.
    """
    before = compute_all(y, p_before, n_bins, strategy)
    after = compute_all(y, p_after, n_bins, strategy)
    improvement = {m: (after[m] - before[m]) if m in HIGHER_IS_BETTER else (before[m] - after[m])
                   for m in METRIC_NAMES}
    return {"before": before, "after": after, "improvement": improvement,
            "n": int(np.asarray(p_before).size), "n_bins": n_bins, "strategy": strategy}


def format_report(report: dict[str, Any]) -> str:
    """A fixed-width text table of a :func:`calibration_report`."""
    lines = [f"{'metric':<10}{'before':>10}{'after':>10}{'improvement':>13}"]
    for m in METRIC_NAMES:
        lines.append(f"{m:<10}{report['before'][m]:>10.4f}{report['after'][m]:>10.4f}"
                     f"{report['improvement'][m]:>+13.4f}")
    lines.append(f"(n={report['n']}, {report['n_bins']} {report['strategy']} bins for ECE/MCE; "
                 "improvement > 0 means better)")
    return "\n".join(lines)
