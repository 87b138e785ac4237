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

from mlcal._validation import check_binary_forecasts

METRIC_NAMES = ("ece", "mce", "brier", "rmse", "log_loss", "auc", "accuracy")
# metrics where a larger value is better; for the rest smaller is better
HIGHER_IS_BETTER = frozenset({"auc", "accuracy"})
BIN_STRATEGIES = ("uniform", "quantile")


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
    y, p = check_binary_forecasts(y, p)
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
    # np.sum, not np.dot: BLAS kernels sum in a CPU-specific order
    return float(np.sum(c["count"] * gap) / c["count"].sum())


def mce(y, p, n_bins: int = 10, strategy: str = "uniform") -> float:
    """Maximum calibration error: max over non-empty bins of |o_k - e_k|; see :func:`ece`."""
    c = reliability_curve(y, p, n_bins, strategy)
    return float(np.max(np.abs(c["fraction_positive"] - c["mean_predicted"])))


def brier_per_row(y, p) -> np.ndarray:
    """Each row's squared error ``(y_i - p_i)^2``; :func:`brier` is their mean (paired
    comparisons of two predictors take differences of these)."""
    y, p = check_binary_forecasts(y, p)
    return (y - p) ** 2


def brier(y, p) -> float:
    """Brier score, mean((y - p)^2)."""
    return float(np.mean(brier_per_row(y, p)))


def rmse(y, p) -> float:
    """Root mean squared error, sqrt(Brier), as reported in the calibration papers."""
    return float(np.sqrt(brier(y, p)))


def log_loss_per_row(y, p, eps: float = 1e-15) -> np.ndarray:
    """Each row's negative log-likelihood (p clipped to [eps, 1 - eps]); :func:`log_loss` is
    their mean."""
    y, p = check_binary_forecasts(y, p)
    q = np.clip(p, eps, 1.0 - eps)
    return -(y * np.log(q) + (1.0 - y) * np.log1p(-q))


def log_loss(y, p, eps: float = 1e-15) -> float:
    """Mean negative log-likelihood, with p clipped to [eps, 1 - eps] so 0/1 predictions stay finite."""
    return float(np.mean(log_loss_per_row(y, p, eps)))


def auc(y, p) -> float:
    """Area under the ROC curve (Mann-Whitney statistic, tied predictions count one half).

    Raises ``ValueError`` when ``y`` has a single class. Unlike the papers' code this is not
    folded to max(AUC, 1 - AUC).
    """
    from scipy.stats import rankdata

    y, p = check_binary_forecasts(y, p)
    n_pos = float(y.sum())
    n_neg = y.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC is undefined when y contains a single class")
    ranks = rankdata(p)  # average ranks for ties
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def accuracy(y, p, threshold: float = 0.5) -> float:
    """Fraction of correct labels when p >= threshold predicts class 1."""
    y, p = check_binary_forecasts(y, p)
    return float(np.mean((p >= threshold) == (y == 1)))


def compute_all(y, p, n_bins: int = 10, strategy: str = "uniform") -> dict[str, float]:
    """Every metric of :data:`METRIC_NAMES` for one set of predictions (AUC is NaN for one class)."""
    y, p = check_binary_forecasts(y, p)
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
    width = max(10, *(len(m) + 1 for m in report["before"]))
    lines = [f"{'metric':<{width}}{'before':>10}{'after':>10}{'improvement':>13}"]
    for m in report["before"]:   # the report's own metrics (binary or multiclass), in order
        lines.append(f"{m:<{width}}{report['before'][m]:>10.4f}{report['after'][m]:>10.4f}"
                     f"{report['improvement'][m]:>+13.4f}")
    lines.append(f"(n={report['n']}, {report['n_bins']} {report['strategy']} bins for ECE/MCE; "
                 "improvement > 0 means better)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Estimators beyond binned ECE. Binned ECE is biased upwards on small samples and depends on the
# binning; these are the estimators users ask for to read a small evaluation set honestly.

def adaptive_ece(y, p, n_bins: int = 15) -> float:
    """Adaptive (equal-mass) ECE: :func:`ece` with ``n_bins`` equal-count bins.

    Each bin holds the same number of predictions (the first ``N mod n_bins`` one more), so no
    bin is nearly empty where predictions are sparse (Nixon et al. 2019, "Measuring calibration
    in deep learning").
    """
    return ece(y, p, n_bins, "quantile")


def _equal_mass_bins(p_sorted: np.ndarray, n_bins: int) -> np.ndarray:
    """Upper bin edges for equal-mass binning: split the sorted predictions into ``n_bins``
    near-equal groups and put each edge halfway between neighbouring groups; the last edge is
    1. Duplicate edges (ties) are merged."""
    k = min(n_bins, p_sorted.size)
    groups = np.array_split(p_sorted, k)
    edges = [(groups[i][-1] + groups[i + 1][0]) / 2.0 for i in range(k - 1)] + [1.0]
    return np.unique(edges)


def debiased_ece(y, p, n_bins: int = 15) -> float:
    """Debiased L2 calibration error of Kumar, Liang & Ma (2019, "Verified uncertainty
    calibration").

    With equal-mass bins b (weights w_b = n_b / N, mean prediction e_b, fraction of positives
    o_b), the plug-in squared error sum_b w_b (o_b - e_b)^2 is biased upwards by the sampling
    variance of o_b; subtracting its unbiased estimate o_b (1 - o_b) / (n_b - 1) gives::

        CE^2 = sum_b w_b [ (o_b - e_b)^2 - o_b (1 - o_b) / (n_b - 1) ]

    and the estimate is sqrt(max(CE^2, 0)). Bins with fewer than two items add nothing. Bin edges
    lie halfway between neighbouring equal-count groups of the sorted predictions; a prediction
    equal to an edge falls in the lower bin.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p : array-like of shape (n,)
        Predicted probabilities of the positive class.
    n_bins : int, default=15

    Returns
    -------
    float
        An estimate of the L2 (root-mean-square) calibration error, not of the L1 ECE.
    """
    y, p = check_binary_forecasts(y, p)
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    edges = _equal_mass_bins(np.sort(p), n_bins)
    ids = np.searchsorted(edges, p, side="left")
    k = edges.size
    count = np.bincount(ids, minlength=k).astype(np.float64)
    sum_p = np.bincount(ids, weights=p, minlength=k)
    sum_y = np.bincount(ids, weights=y, minlength=k)
    ok = count >= 2
    o = sum_y[ok] / count[ok]
    e = sum_p[ok] / count[ok]
    sq = np.sum(count[ok] / p.size * ((o - e) ** 2 - o * (1.0 - o) / (count[ok] - 1.0)))
    return float(np.sqrt(max(sq, 0.0)))


def _grid_for(sigma: float) -> np.ndarray:
    # at least ~10 grid points per bandwidth so the trapezoid rule resolves the kernel
    return np.linspace(0.0, 1.0, int(min(20001, max(1001, np.ceil(10.0 / sigma)) + 1)))


def smooth_ece_at(y, p, sigma: float) -> float:
    """Smooth ECE at a fixed kernel bandwidth ``sigma`` (Błasiok & Nakkiran 2023).

    The residuals r_i = p_i - y_i are smoothed with a Gaussian kernel of width ``sigma``
    reflected at 0 and 1; smECE_sigma = integral over t in [0, 1] of |sum_i K(t, p_i) r_i| / N,
    divided by the kernel density's mass on [0, 1] (1 up to quadrature error). Computed by
    kernel sums (truncated where the kernel is below 1e-17 of its peak, see
    :mod:`mlcal._solvers.smooth_kernel`) and the trapezoid rule on a grid of at least 10 points
    per ``sigma``; the value has the same bits on every x86-64 CPU.
    """
    y, p = check_binary_forecasts(y, p)
    if not np.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"sigma must be a positive number, got {sigma!r}")
    return _smooth_ece_at(*_aggregate(p, p - y), float(sigma))


def _smooth_ece_at(pts: np.ndarray, res: np.ndarray, mass: np.ndarray, sigma: float) -> float:
    from mlcal._solvers.smooth_kernel import smooth_ratio

    return smooth_ratio(pts, res, mass, sigma, _grid_for(sigma))


_AGGREGATE_ABOVE = 2001


def _aggregate(p: np.ndarray, r: np.ndarray):
    """Large samples: spread each (p_i, r_i) linearly onto the two nearest of 2001 grid points
    (spacing 5e-4, far below any bandwidth the rule picks), so the kernel sums cost
    O(grid x 2001) instead of O(grid x N). Small samples are used as they are."""
    if p.size <= _AGGREGATE_ABOVE:
        return p, r, np.ones(p.size)
    m = _AGGREGATE_ABOVE - 1
    pos = p * m
    left = np.minimum(pos.astype(np.int64), m - 1)
    frac = pos - left
    mass = np.bincount(left, 1.0 - frac, m + 1) + np.bincount(left + 1, frac, m + 1)
    res = np.bincount(left, (1.0 - frac) * r, m + 1) + np.bincount(left + 1, frac * r, m + 1)
    return np.linspace(0.0, 1.0, m + 1), res, mass


def smooth_ece(y, p, *, return_bandwidth: bool = False, tol: float = 1e-4):
    """Smooth ECE with the bandwidth rule of Błasiok & Nakkiran (2023, "Smooth ECE: principled
    reliability diagrams via kernel smoothing").

    smECE_sigma decreases as the bandwidth sigma grows; the rule picks the fixed point sigma*
    with smECE_sigma* = sigma* (found by bisection to ``tol``) and reports smECE_sigma*. A
    perfectly calibrated predictor thus gets a small sigma* and value; a miscalibrated one is
    judged at the scale of its own error. See :func:`smooth_ece_at` for the kernel.

    Parameters
    ----------
    y, p : array-like of shape (n,)
        Labels in {0, 1} and predicted probabilities.
    return_bandwidth : bool, default=False
        Also return sigma*.
    tol : float, default=1e-4
        Bisection tolerance on sigma.

    Returns
    -------
    float, or (float, float) with ``return_bandwidth``
    """
    y, p = check_binary_forecasts(y, p)
    data = _aggregate(p, p - y)
    # smECE_sigma <= sum |r| / N up to the trapezoid rule's error on one kernel (far below 1%):
    # every bisection midpoint above that bound goes to ``hi`` without a kernel sum, which is
    # the step the kernel sum would take, so sigma* and the value are unchanged
    bound = 1.01 * float(np.sum(np.abs(data[1])) / np.sum(data[2]))
    seen: dict[float, float] = {}     # sigma -> smECE_sigma: the last ``hi`` was often probed

    def at(sigma: float) -> float:
        if sigma not in seen:
            seen[sigma] = _smooth_ece_at(*data, sigma)
        return seen[sigma]

    lo, hi = 0.0, 1.0
    if bound >= hi and at(hi) >= hi:  # cannot happen for probabilities, kept for safety
        return (at(hi), hi) if return_bandwidth else at(hi)
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if mid <= bound and at(mid) > mid:
            lo = mid
        else:
            hi = mid
    value = at(hi)
    return (value, hi) if return_bandwidth else value


def spiegelhalter_z(y, p) -> tuple[float, float]:
    """Spiegelhalter's (1986) Z test of calibration.

    Under the hypothesis that every p_i is the true probability of y_i = 1,
    Z = sum (y_i - p_i)(1 - 2 p_i) / sqrt(sum (1 - 2 p_i)^2 p_i (1 - p_i)) is asymptotically
    standard normal; a large |Z| is evidence of miscalibration.

    Returns
    -------
    (z, p_value) with the two-sided p-value 2 (1 - Phi(|z|)).

    Raises
    ------
    ValueError
        When every prediction is 0, 1/2 or 1 (the variance is zero and Z is undefined).
    """
    from scipy.stats import norm

    y, p = check_binary_forecasts(y, p)
    w = 1.0 - 2.0 * p
    var = float(np.sum(w * w * p * (1.0 - p)))
    if var <= 0.0:
        raise ValueError("Spiegelhalter's Z is undefined when every prediction is 0, 0.5 or 1")
    z = float(np.sum((y - p) * w) / np.sqrt(var))
    return z, float(2.0 * norm.sf(abs(z)))


DIAGNOSTIC_NAMES = ("adaptive_ece", "debiased_ece", "smooth_ece", "spiegelhalter_z",
                    "spiegelhalter_p")


def calibration_diagnostics(y, p) -> dict[str, float]:
    """The estimators of :data:`DIAGNOSTIC_NAMES` for one set of predictions (NaN where one is
    undefined, e.g. Spiegelhalter's Z when every prediction is 0, 1/2 or 1)."""
    y, p = check_binary_forecasts(y, p)
    out = {"adaptive_ece": adaptive_ece(y, p), "debiased_ece": debiased_ece(y, p),
           "smooth_ece": smooth_ece(y, p)}
    try:
        out["spiegelhalter_z"], out["spiegelhalter_p"] = spiegelhalter_z(y, p)
    except ValueError:
        out["spiegelhalter_z"] = out["spiegelhalter_p"] = float("nan")
    return out


INTERVAL_METHODS = ("wilson", "clopper-pearson")


def proportion_interval(positives, count, *, method: str = "wilson",
                        confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Confidence interval of a binomial proportion, element-wise (per reliability bin).

    Parameters
    ----------
    positives, count : array-like
        Successes k and trials n (n >= 1) per bin.
    method : {"wilson", "clopper-pearson"}, default="wilson"
        Wilson's score interval (good coverage, never outside [0, 1]) or the exact
        Clopper-Pearson interval (conservative) from beta quantiles.
    confidence : float, default=0.95

    Returns
    -------
    (lower, upper) arrays.
    """
    from scipy.stats import beta, norm

    k = np.asarray(positives, dtype=np.float64)
    n = np.asarray(count, dtype=np.float64)
    if (n < 1).any() or (k < 0).any() or (k > n).any():
        raise ValueError("need 0 <= positives <= count and count >= 1 in every bin")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    alpha = 1.0 - confidence
    if method == "wilson":
        z = norm.ppf(1.0 - alpha / 2.0)
        phat = k / n
        centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n))
        return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    if method == "clopper-pearson":
        with np.errstate(invalid="ignore"):
            lo = np.where(k > 0, beta.ppf(alpha / 2.0, k, n - k + 1), 0.0)
            hi = np.where(k < n, beta.ppf(1.0 - alpha / 2.0, k + 1, n - k), 1.0)
        return lo, hi
    raise ValueError(f"method must be one of {INTERVAL_METHODS}, got {method!r}")
