"""Holding out calibration rows for honest metrics.

A calibrator scored on the rows it was fitted on looks better than it is (isotonic regression
reproduces its training labels' frequencies). :func:`calibrate_and_log
<mlcal.mlflow.calibrate_and_log>` and ``mlcal calibrate`` without separate evaluation data
therefore hold out :data:`DEFAULT_HOLDOUT` of the rows, stratified by label and seeded, fit on
the rest and log metrics on the held-out rows only.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

#: share of the calibration rows held out for the logged metrics when no evaluation set is given
DEFAULT_HOLDOUT = 0.25
#: fewest held-out rows accepted (metrics on fewer are mostly noise; the gate wants 100)
MIN_HELD_OUT_ROWS = 20


def holdout_split(y, fraction: float = DEFAULT_HOLDOUT, seed: int = 0, *,
                  what: str = "calibration rows") -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(fit, held_out)``: of each label's ``n`` rows, ``round(fraction * n)``
    (exact rational rounding, halves up) are held out, drawn with ``np.random.default_rng(seed)``.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels of any type (the split is stratified by them).
    fraction : float
        Share held out, in (0, 1).
    seed : int
        Seed of the draw.
    what : str
        How the rows are named in error messages.

    Raises
    ------
    ValueError
        ``fraction`` outside (0, 1), fewer than :data:`MIN_HELD_OUT_ROWS` held-out rows, or a
        label whose rows would all land on one side (too few rows of it).
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the held-out share must lie in (0, 1), got {fraction!r}")
    labels = np.asarray(y, dtype=object).reshape(-1)
    # stratify on the labels' text: only groups rows, so "1" and 1 sharing a group is harmless
    names, codes = np.unique(labels.astype(str), return_inverse=True)
    rng = np.random.default_rng(seed)
    share = Fraction(fraction)
    held = []
    for c, name in enumerate(names):
        rows = np.flatnonzero(codes == c)
        k = int(share * rows.size + Fraction(1, 2))   # floor(x + 1/2), exact
        if k == 0 or k == rows.size:
            raise ValueError(f"holding out {fraction:.0%} of the {labels.size} {what} leaves "
                             f"label {str(name)!r} ({rows.size} rows) on one side only; give a "
                             "separate evaluation set, more rows, or no hold-out (metrics "
                             "then computed in-sample and tagged so)")
        held.append(rng.permutation(rows)[:k])
    held_out = np.sort(np.concatenate(held))
    if held_out.size < MIN_HELD_OUT_ROWS:
        raise ValueError(f"holding out {fraction:.0%} of the {labels.size} {what} gives "
                         f"{held_out.size} rows, fewer than {MIN_HELD_OUT_ROWS}, too few for "
                         "metrics; give a separate evaluation set, more rows, or no hold-out "
                         "(metrics then computed in-sample and tagged so)")
    mask = np.ones(labels.size, dtype=bool)
    mask[held_out] = False
    return np.flatnonzero(mask), held_out
