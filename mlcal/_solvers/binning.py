"""Equal-frequency binning of sorted, tie-collapsed weighted points (histogram binning, and the
bin cap of SBB / ABB)."""

from __future__ import annotations

import numpy as np


def equal_frequency_bins(wsum: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index of each (already tie-collapsed, sorted) point for ``n_bins`` equal-weight bins.

    A point goes to the bin containing the centre of its weight interval, so tied scores (one
    point) are never split and the bins stay contiguous. Empty bins are removed by renumbering.
    With whole-number weights the bin index ``floor(centre * B / N)`` is computed in integer
    arithmetic (``(2 cum - w) * B // (2 N)``), so no rounding can move a point across a bin edge;
    fractional weights use the same formula in floating point (IEEE operations only: the same
    result on every CPU).
    """
    n_bins = min(int(n_bins), wsum.size)   # never more bins than points (bounds the cost)
    cum = np.cumsum(wsum)
    total = cum[-1]
    if np.all(wsum == np.floor(wsum)) and 2.0 * total * n_bins < 2.0 ** 62:
        twice_centre = 2 * cum.astype(np.int64) - wsum.astype(np.int64)
        raw = twice_centre * n_bins // (2 * int(total))
    else:
        raw = ((cum - 0.5 * wsum) / total * n_bins).astype(np.int64)   # no overflow at 1e300
    raw = np.minimum(raw, n_bins - 1)
    # renumber so the realised bins are 0..B'-1 with no gaps
    return np.concatenate(([0], np.cumsum(raw[1:] != raw[:-1])))
