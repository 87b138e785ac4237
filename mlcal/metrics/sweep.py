"""ECE-sweep: the monotonic sweep calibration error of Roelofs, Cain, Shlens & Mozer (AISTATS
2022, "Mitigating bias in calibration error estimation").

Equal-mass binning with ``b`` bins as in :func:`mlcal.metrics.ece` with ``strategy="quantile"``
(rows sorted by prediction, ties by label ascending; ``b`` consecutive groups whose sizes differ by
at most one, the larger first). The sweep tries ``b = 1, 2, ...`` and stops at the first ``b``
whose bin fractions of positives ``o_1 <= o_2 <= ... <= o_b`` are not non-decreasing; ``b*`` is
the last monotone ``b`` (the paper's ``b* = max{b : every b' <= b is monotone}``), and::

    ECE_sweep = ( sum_k (n_k / N) |o_k - e_k|^q )^(1/q)       over the b* bins

with ``q = 1`` (default; then it equals ``ece(y, p, b*, "quantile")``) or ``q = 2``. The
monotonicity test compares the integer counts of positives cross-multiplied by the bin sizes, so
no decision hangs on a rounding error. No sample weights: equal-mass bins of weighted rows have
no single natural definition.

Cost: each tried ``b`` costs O(b) on prefix sums, so the sweep costs O(b*^2) after an
O(n log n) sort; ``b*`` is small (tens to hundreds) unless the labels are nearly separated by
``p`` (20,000 perfectly separated rows sweep to ``b* = n`` in about 2 s).
"""

from __future__ import annotations

import numpy as np

from mlcal._validation import check_binary_forecasts


def _equal_mass_sizes(n: int, b: int) -> np.ndarray:
    size, rest = divmod(n, b)
    sizes = np.full(b, size, dtype=np.int64)
    sizes[:rest] += 1
    return sizes


def sweep_n_bins(y, p) -> int:
    """The number of equal-mass bins ``b*`` chosen by the monotonic sweep."""
    y, p = check_binary_forecasts(y, p)
    return _sweep(y[np.lexsort((y, p))].astype(np.int64))


def _sweep(y_sorted: np.ndarray) -> int:
    n = y_sorted.size
    cum = np.concatenate(([0], np.cumsum(y_sorted)))
    best = 1
    for b in range(2, n + 1):
        sizes = _equal_mass_sizes(n, b)
        ends = np.cumsum(sizes)
        pos = cum[ends] - cum[ends - sizes]
        # o_j <= o_{j+1}  <=>  pos_j * n_{j+1} <= pos_{j+1} * n_j   (exact in integers)
        if np.any(pos[:-1] * sizes[1:] > pos[1:] * sizes[:-1]):
            break
        best = b
    return best


def ece_sweep(y, p, *, norm: int = 1, return_n_bins: bool = False):
    """Monotonic-sweep ECE (Roelofs et al. 2022); see the module docstring.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p : array-like of shape (n,)
        Predicted probabilities of the positive class.
    norm : {1, 2}, default=1
        The ``q`` of the L_q calibration error.
    return_n_bins : bool, default=False
        Also return the number of bins ``b*``.

    Returns
    -------
    float, or (float, int) with ``return_n_bins``
    """
    if norm not in (1, 2):
        raise ValueError(f"norm must be 1 or 2, got {norm!r}")
    y, p = check_binary_forecasts(y, p)
    order = np.lexsort((y, p))
    ys, ps = y[order], p[order]
    b = _sweep(ys.astype(np.int64))
    sizes = _equal_mass_sizes(ys.size, b)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    o = np.add.reduceat(ys, starts) / sizes
    e = np.add.reduceat(ps, starts) / sizes
    gap = np.abs(o - e) ** norm
    value = float(np.sum(sizes * gap) / ys.size) ** (1.0 / norm)
    return (value, b) if return_n_bins else value


def top_label_ece_sweep(y, p, *, norm: int = 1) -> float:
    """:func:`ece_sweep` of the top-label confidence against correctness, for class indices
    ``y`` and an (n, K) probability matrix ``p``."""
    from mlcal.metrics.decomposition import top_label_events

    correct, conf = top_label_events(y, p)
    return ece_sweep(correct, conf, norm=norm)


def classwise_ece_sweep(y, p, *, norm: int = 1) -> float:
    """Mean over the K classes of the one-vs-rest :func:`ece_sweep` (each class sweeps its own
    number of bins)."""
    from mlcal.metrics.decomposition import class_indices_and_matrix

    yi, prob = class_indices_and_matrix(y, p)
    per = [ece_sweep((yi == k).astype(np.float64), prob[:, k], norm=norm)
           for k in range(prob.shape[1])]
    return float(np.sum(per) / len(per))
