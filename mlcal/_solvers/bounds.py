"""Moving the pieces of a fitted map that sit at exactly 0 or 1 off the bounds.

A binning or isotonic map predicts the empirical label mean of a piece of the score range, so a
piece whose training labels are all negative predicts exactly 0 and costs an infinite log loss
as soon as one positive falls there. The rule here replaces such a piece's value by its
Beta(a, a) posterior mean ``(k + a) / (n + 2a)`` (``n`` the training weight the piece holds,
``k`` its positive weight), clipped to the neighbouring pieces so a non-decreasing map stays
non-decreasing. Only pieces at exactly 0 or 1 change; all other values are kept bit for bit.
"""

from __future__ import annotations

import numpy as np

from mlcal._solvers.ties import exact_group_sums

#: smallest value a piece moved off 0 may take (when ``(k + a) / (n + 2a)`` underflows)
FLOOR = float(np.finfo(np.float64).tiny)
#: largest value a piece moved off 1 may take (``(n + a) / (n + 2a)`` rounds to 1 once
#: ``n / a`` exceeds 2**53)
CEILING = float(np.nextafter(1.0, 0.0))


def equal_runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` of the maximal runs of equal adjacent values (``ends`` exclusive)."""
    change = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts = np.concatenate(([0], change)).astype(np.int64)
    ends = np.append(change, values.size).astype(np.int64)
    return starts, ends


def off_bound_run_values(run_values: np.ndarray, n: np.ndarray, k: np.ndarray,
                         a: float) -> np.ndarray:
    """New value of each run of a map, given the run's training weight ``n`` and positive
    weight ``k``.

    A run at exactly 0 takes ``min((k + a) / (n + 2a), its neighbours' values)``, a run at
    exactly 1 takes ``max((k + a) / (n + 2a), its neighbours' values)``; the neighbours' values
    are the original ones. Adjacent runs differ, so a 0-run's neighbours are positive and the new
    value lies in (0, neighbour]; in a non-decreasing map a 0-run is the first run and a 1-run
    the last, so the map stays non-decreasing (a 0-run next to a 1-run: a/(n+2a) <= 1/2 <=
    (n'+a)/(n'+2a)). Other runs keep their value.
    """
    v = np.asarray(run_values, dtype=np.float64)
    out = v.copy()
    at_bound = (v == 0.0) | (v == 1.0)
    if not at_bound.any():
        return out
    smoothed = (k + a) / (n + 2.0 * a)
    left = np.concatenate(([np.nan], v[:-1]))
    right = np.append(v[1:], np.nan)
    for j in np.flatnonzero(at_bound):
        neighbours = [u for u in (left[j], right[j]) if not np.isnan(u)]
        if v[j] == 0.0:
            new = min([smoothed[j], *neighbours])
        else:
            new = max([smoothed[j], *neighbours])
        out[j] = min(max(new, FLOOR), CEILING)
    return out


def run_weights(x: np.ndarray, pos: np.ndarray, w: np.ndarray, lo: np.ndarray,
                hi: np.ndarray, hi_closed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Training weight and positive weight of each score interval ``[lo, hi)`` (``[lo, hi]``
    with ``hi_closed``) over sorted points ``x`` with weights ``w`` and positive weights
    ``pos``. The intervals are increasing and disjoint. Sums are correctly rounded (not
    differences of running sums, which cancel catastrophically under large weights), so the
    result does not depend on the original row order either."""
    i = np.searchsorted(x, lo, side="left")
    j = np.searchsorted(x, hi, side="right" if hi_closed else "left")
    # groups [i0, j0), [j0, i1), [i1, j1), ...: the intervals are the even-numbered groups
    bounds = np.column_stack((i, j)).reshape(-1).astype(np.int64)
    wx = np.append(w, 0.0)   # a last empty group [j_last, len) is summed as one zero
    px = np.append(pos, 0.0)
    return exact_group_sums(wx, bounds)[::2], exact_group_sums(px, bounds)[::2]
