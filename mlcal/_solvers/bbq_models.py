"""BBQ model family (Naeini, Cooper & Hauskrecht, AAAI 2015), scored all at once.

Every candidate is an equal-frequency binning of the sorted, tie-collapsed calibration set. With
prefix sums of the weights, of the positive weights and of the positives' scores, a B-bin model
costs about O(B) (one search per boundary, started at its expected position), so the whole
family (B up to 10 N^(1/3)) costs about O(N^(2/3)) after the sort. Scoring runs in one numba
loop that keeps nothing but the score of each model; only the models the elbow keeps are
materialised afterwards.

The recipe follows the authors' MATLAB code (``BBQ/build.m``; derivation and deviations in
``docs/bbq.md``):

* B from ``max(1, floor(N^(1/3)/10))`` to ``min(ceil(N/5), ceil(10 N^(1/3)))``, each integer
  computed exactly (:mod:`mlcal._solvers.exact`): the code's ``pow`` gives 1000^(1/3) = 9.999...,
  one less B_min at N = 8000, 27000, 1e6, and a float ``cbrt`` rounds differently by CPU;
* nominal bin i ends at sorted position ``i * floor(N/B)``, the last bin takes the remainder
  (with fractional weights, at weight ``i * N/B``; see :func:`nominal_block_sizes`);
* cuts halfway between neighbouring scores, the first bin starts at 0 and the last ends at 1;
* log marginal likelihood per bin (Beta-binomial, prior strength 2 around the clipped midpoint)::

      lnG(2) - lnG(n + 2) + lnG(n1 + 2p) - lnG(2p) + lnG(n0 + 2(1-p)) - lnG(2(1-p))

* bin estimate ``P = (n1 + p0) / (n + 1)`` with ``p0 = (sum of positives' scores + m) / (n1 + 1)``.

Ties (our rule, not the code's): a nominal boundary that falls inside a run of equal scores moves
to the end of that run, so equal scores never sit in different bins; coinciding boundaries merge,
so a model may realise fewer than B bins. Without ties this is exactly the code's binning.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numba import njit

from mlcal._solvers.detmath import det_lgamma

from mlcal._solvers.exact import ceil_cbrt_scaled, ceil_div, floor_cbrt_scaled, floor_divide_exact
from mlcal._solvers.ties import midpoint_cuts

PRIOR_CLIP = 0.005  # the code clips the prior mean p_b to [0.005, 0.995]


def bbq_bin_range(n_total: float) -> tuple[int, int]:
    """Smallest and largest number of bins of the BBQ family for a calibration set of size N.

    ``B_min = max(1, floor(cbrt(N)/10))`` and ``B_max = min(ceil(N/5), ceil(10 cbrt(N)))``,
    exact for the given (possibly fractional) total weight N on every CPU.
    """
    b_min = max(1, floor_cbrt_scaled(n_total, Fraction(1, 10)))
    b_max = min(ceil_div(n_total, 5), ceil_cbrt_scaled(n_total, 10))
    return b_min, max(b_min, b_max)


def nominal_block_sizes(n_total: float, whole: bool, n_bins: np.ndarray) -> np.ndarray:
    """Weight of one nominal bin of each B-bin model: bin i ends at weight ``i * block``.

    With whole-number weights (the authors' setting: counts) ``block = floor(N / B)`` in integer
    arithmetic, and the last bin takes the remainder. With fractional weights there is no count
    to floor, so ``block = N / B`` (one correctly rounded division, the same on every CPU).
    """
    n_bins = np.asarray(n_bins, dtype=np.int64)
    if whole:
        total = int(n_total)
        return np.array([total // int(b) for b in n_bins], dtype=np.float64)
    return n_total / n_bins.astype(np.float64)


def cut_values(x: np.ndarray) -> np.ndarray:
    """Cut between unique sorted scores ``x[j]`` and ``x[j+1]``: their midpoint.

    Guaranteed ``x[j] < cut <= x[j+1]`` (the midpoint of two adjacent doubles may round down to
    ``x[j]``; then ``x[j+1]`` is used), so with ``side="right"`` each training score stays in its
    own bin.
    """
    return midpoint_cuts(x[:-1], x[1:])



@njit(cache=True)
def _search_left(a: np.ndarray, v: float, lo: int, guess: int) -> int:
    """First row i >= lo with a[i, 0] >= v (column 0 sorted), or the number of rows.

    Gallops outwards from ``guess`` before bisecting. With a good guess (the BBQ boundaries are
    evenly spaced in weight) this takes a couple of probes near the answer, instead of a
    latency-bound bisection of the whole array, which dominated the run time at N = 1e6.
    """
    n = a.shape[0]
    g = min(max(guess, lo), n - 1)
    if a[g, 0] < v:                      # answer in (g, n]
        lo = g + 1
        step = 1
        hi = lo
        while hi < n and a[hi, 0] < v:
            lo = hi + 1
            hi = lo + step
            step *= 2
        if hi > n:
            hi = n
    else:                             # answer in [lo, g]
        hi = g
        step = 1
        while hi - step >= lo and a[hi - step, 0] >= v:
            hi -= step
            step *= 2
        lo = max(lo, hi - step)
    while lo < hi:
        half = (lo + hi) >> 1
        if a[half, 0] < v:
            lo = half + 1
        else:
            hi = half
    return lo


@njit(cache=True)
def bin_ends(table: np.ndarray, n_bins: int, block: float) -> np.ndarray:
    """Index of the last unique point of every realised bin of the ``n_bins``-bin model.

    ``table[:, 0]`` holds the cumulative weights (see :class:`SortedCalibrationSet`). Nominal
    bin i ends at sorted position ``i * block`` (1-based, in weight units; ``block`` from
    :func:`nominal_block_sizes`); the bin closes after the unique point that holds that
    position, i.e. at the end of its tie run. Boundaries after the last point and repeated
    boundaries are dropped; the last bin ends at the last point.
    """
    m = table.shape[0]
    total = table[m - 1, 0]
    per_point = total / m             # mean weight of a unique point, for the search guess only
    ends = np.empty(min(n_bins, m), dtype=np.int64)
    k = 0
    j = 0
    i = 1
    while i < n_bins:
        target = i * block
        j = _search_left(table, target, j, int(min(target / per_point, m)) - 1)
        if j >= m - 1:
            break
        if k == 0 or ends[k - 1] != j:
            ends[k] = j
            k += 1
        # every target up to the end of point j lands on point j again: skip them (the exact
        # floor of C_j / block can only be such a target or the first one beyond), so a model
        # costs O(realised bins), not O(B)
        i = max(i + 1, int(floor_divide_exact(table[j, 0], block))) if block > 0.0 else i + 1
    ends[k] = m - 1
    return ends[:k + 1]


@njit(cache=True)
def _bin_log_ml(n: float, n1: float, lower: float, upper: float) -> float:
    """Beta-binomial log marginal likelihood of one bin; prior Beta(2p, 2(1-p)), p the clipped
    midpoint of [lower, upper]."""
    p = min(max(0.5 * (lower + upper), PRIOR_CLIP), 1.0 - PRIOR_CLIP)
    a = 2.0 * p
    b = 2.0 - a
    n1 = min(max(n1, 0.0), n)
    return (det_lgamma(n1 + a) - det_lgamma(a) + det_lgamma(n - n1 + b) - det_lgamma(b)
            - det_lgamma(n + 2.0))


@njit(cache=True)
def _family_log_ml(table, n_bins, blocks):
    out = np.empty(n_bins.size)
    for t in range(n_bins.size):
        ends = bin_ends(table, n_bins[t], blocks[t])
        total = 0.0
        w_prev = 0.0
        y_prev = 0.0
        lower = 0.0
        for e in ends:
            # one table row per bin: the search has just brought it into cache
            w_e, y_e, upper = table[e, 0], table[e, 1], table[e, 2]
            total += _bin_log_ml(w_e - w_prev, y_e - y_prev, lower, upper)
            w_prev, y_prev, lower = w_e, y_e, upper
        out[t] = total
    return out


@njit(cache=True)
def _prefix_table(x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray) -> np.ndarray:
    """Row j: cumulative weight, cumulative positive weight, upper edge of a bin that ends at
    point j (the cut after x[j], 1 for the last point), cumulative sum of w*y*x (positives'
    scores). Packed so that scoring a bin touches one cache line."""
    m = x.size
    table = np.empty((m, 4))
    cw = 0.0
    cy = 0.0
    cs = 0.0
    for j in range(m):
        wy = wsum[j] * ybar[j]
        cw += wsum[j]
        cy += wy
        cs += wy * x[j]
        table[j, 0] = cw
        table[j, 1] = cy
        table[j, 3] = cs
        if j + 1 < m:
            mid = 0.5 * (x[j] + x[j + 1])
            table[j, 2] = mid if mid > x[j] else x[j + 1]   # same rule as cut_values
        else:
            table[j, 2] = 1.0
    return table


class SortedCalibrationSet:
    """Prefix sums of a sorted, tie-collapsed calibration set with scores in [0, 1].

    Parameters
    ----------
    x, ybar, wsum
        Output of :func:`mlcal._solvers.ties.sort_and_collapse`.
    """

    def __init__(self, x: np.ndarray, ybar: np.ndarray, wsum: np.ndarray):
        self.table = _prefix_table(x, ybar, wsum)
        self.n_total = float(self.table[-1, 0])
        self.n_points = int(x.shape[0])
        # whole-number weights sum exactly (below 2^53), so the authors' integer recipe applies
        self.whole = bool(np.all(wsum == np.floor(wsum))) and self.n_total < 2.0 ** 53

    def block_sizes(self, n_bins) -> np.ndarray:
        """Nominal bin weight of each B-bin model (see :func:`nominal_block_sizes`)."""
        return nominal_block_sizes(self.n_total, self.whole, n_bins)

    def log_marginal_likelihoods(self, n_bins: np.ndarray) -> np.ndarray:
        """Log marginal likelihood (sum of the per-bin Beta-binomial terms) of the B-bin model,
        for every B in ``n_bins``."""
        n_bins = np.asarray(n_bins, dtype=np.int64)
        return _family_log_ml(self.table, n_bins, self.block_sizes(n_bins))

    def model(self, n_bins: int, bin_estimate: str = "authors") -> dict[str, np.ndarray]:
        """The realised bins of the ``n_bins``-bin model.

        Returns a dict of per-bin arrays: ``n`` and ``n1`` (weight and positive weight),
        ``lower`` and ``upper`` (edges; 0 and 1 at the outer ends), ``prob`` (bin estimate) and
        ``cuts`` (= ``upper[:-1]``).

        ``bin_estimate="authors"``: ``(n1 + p0)/(n + 1)`` with ``p0 = (sum of the positives'
        scores + m)/(n1 + 1)`` and m the (unclipped) bin midpoint, as in the BBQ code;
        ``"beta_mean"``: the posterior mean ``(n1 + 2p)/(n + 2)`` of the scoring prior.
        """
        block = float(self.block_sizes([n_bins])[0])
        rows = self.table[bin_ends(self.table, int(n_bins), block)]
        before = np.vstack((np.zeros((1, 4)), rows[:-1]))   # the row ending the previous bin
        upper, lower = rows[:, 2], before[:, 2]             # lower edge of the first bin is 0
        n = rows[:, 0] - before[:, 0]
        n1 = np.clip(rows[:, 1] - before[:, 1], 0.0, n)
        mid = 0.5 * (lower + upper)
        if bin_estimate == "authors":
            s1 = rows[:, 3] - before[:, 3]
            p0 = (s1 + mid) / (n1 + 1.0)
            prob = (n1 + p0) / (n + 1.0)
        elif bin_estimate == "beta_mean":
            prob = (n1 + 2.0 * np.clip(mid, PRIOR_CLIP, 1.0 - PRIOR_CLIP)) / (n + 2.0)
        else:
            raise ValueError(f"bin_estimate must be 'authors' or 'beta_mean', "
                             f"got {bin_estimate!r}")
        return {"n": n, "n1": n1, "lower": lower, "upper": upper,
                "prob": np.clip(prob, 0.0, 1.0), "cuts": upper[:-1]}


def elbow(rel_lik: np.ndarray, alpha: float) -> np.ndarray:
    """The authors' elbow rule on relative likelihoods; returns kept indices, best first.

    1. sigma^2 = population variance of the relative likelihoods R;
    2. sort R in descending order (stable);
    3. k = 1; skip equal leading values;
    4. while k < b and (R(k) - R(k+1)) / sigma^2 > alpha: k += 1;
    5. keep sorted positions 1..k-1, or only the top one when k = 1.

    The model right after the last large gap is excluded, as in the authors' code (netcal keeps
    it, an off-by-one). Degenerate cases where the code fails: a single model is kept; when all
    relative likelihoods are equal (sigma^2 = 0) all models are kept, since none is preferred.
    """
    r = np.asarray(rel_lik, dtype=np.float64)
    b = r.size
    order = np.argsort(-r, kind="stable")
    if b == 1:
        return order
    sigma2 = float(np.var(r))
    rs = r[order]
    if sigma2 == 0.0:
        return order
    k = 1                                   # 1-based position, as in the description
    while k < b and rs[k - 1] == rs[k]:
        k += 1
    while k < b and (rs[k - 1] - rs[k]) / sigma2 > alpha:
        k += 1
    return order[:k - 1] if k > 1 else order[:1]


def fold_step_functions(cuts: list[np.ndarray], values: list[np.ndarray],
                        weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fold a weighted average of step functions into one (thresholds, values) pair.

    Member k is ``values[k][searchsorted(cuts[k], s, side="right")]``. The result uses the union
    of all cuts, so it equals ``sum_k weights[k] * member_k(s)`` at every s (up to rounding).
    Each member contributes its jumps at its own cuts; a cumulative sum over the sorted union
    then gives the folded values in O(total cuts * log).
    """
    base = float(sum(w * v[0] for w, v in zip(weights, values)))
    if not any(c.size for c in cuts):
        return np.empty(0), np.array([base])
    all_cuts = np.concatenate(cuts)
    jumps = np.concatenate([w * np.diff(v) for w, v in zip(weights, values)])
    thresholds, inverse = np.unique(all_cuts, return_inverse=True)
    steps = np.bincount(inverse.reshape(-1), weights=jumps, minlength=thresholds.size)
    folded = base + np.concatenate(([0.0], np.cumsum(steps)))
    return thresholds, folded
