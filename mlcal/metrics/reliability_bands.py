"""The CORP reliability curve with consistency bands.

The CORP curve (Dimitriadis, Gneiting & Jordan 2021) is the isotonic (PAV) regression of the
labels on the forecasts, :func:`mlcal.metrics.decomposition.isotonic_recalibration`: no bins to
choose, and its miscalibration ``MCB`` is the area the decomposition reports.

A consistency band (Broecker & Smith 2007) shows where the curve of a *calibrated* forecaster
with the same forecasts would fall: labels are redrawn from the forecasts themselves,
``y* ~ Bernoulli(p)``, the curve is refitted on ``(p, y*)`` and, at each forecast value, the
``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the refitted curves are the band. Where
the observed curve leaves the band, chance alone is an unlikely explanation.

Cost is bounded: ties are pooled (a forecast value seen ``c`` times draws one
``Binomial(c, p)``), and above ``max_cells`` distinct forecasts the sorted forecasts are pooled
into ``max_cells`` cells of about equal row count, each drawing ``Binomial(c, mean p)`` -- a
slightly wider band than the rows' own ``sum Bernoulli(p_i)`` (its variance ``c pbar (1 - pbar)``
is never smaller than ``sum p_i (1 - p_i)``), so the approximation errs towards "consistent".
Each resample is one compiled PAV pass over at most ``max_cells`` points, so the band costs
``O(n_resamples * max_cells)`` after one sort, whatever the number of rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlcal._solvers.pava import pava
from mlcal.metrics.decomposition import isotonic_recalibration

#: resamples of a band: its 5 % / 95 % quantiles move by well under the band's width between
#: seeds at this size, and the cost stays a fraction of a second per curve
DEFAULT_BAND_RESAMPLES = 200
#: above this many distinct forecasts the band is computed on pooled cells (module docstring)
DEFAULT_MAX_CELLS = 2000
DEFAULT_BAND_LEVEL = 0.9


@dataclass(frozen=True)
class CorpCurve:
    """A CORP reliability curve and its consistency band.

    ``x``/``fitted``/``weight``: the distinct forecasts, the isotonic recalibration at each and
    the number of rows there. ``band_x``/``band_lower``/``band_upper``: the band at ``band_x``
    (the distinct forecasts, or the pooled cells' mean forecasts when there were more than
    ``max_cells`` of them; ``n_cells`` says how many).
    """

    x: np.ndarray
    fitted: np.ndarray
    weight: np.ndarray
    band_x: np.ndarray
    band_lower: np.ndarray
    band_upper: np.ndarray
    level: float
    n_resamples: int
    seed: int
    n_cells: int

    def outside_band(self) -> float:
        """Fraction of the rows whose recalibrated value lies outside the band."""
        lo = np.interp(self.x, self.band_x, self.band_lower)
        hi = np.interp(self.x, self.band_x, self.band_upper)
        out = (self.fitted < lo) | (self.fitted > hi)
        return float(np.sum(self.weight[out]) / np.sum(self.weight))


def _cells(x: np.ndarray, count: np.ndarray, max_cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Pool consecutive distinct forecasts into at most ``max_cells`` cells of about equal row
    count; returns each cell's mean forecast and row count."""
    if x.size <= max_cells:
        return x, count
    before = np.cumsum(count) - count
    cell = np.minimum((before * max_cells) // int(np.sum(count)), max_cells - 1).astype(np.int64)
    starts = np.flatnonzero(np.diff(cell, prepend=-1))
    n = np.add.reduceat(count, starts)
    return np.add.reduceat(x * count, starts) / n, n


def consistency_band(p, *, level: float = DEFAULT_BAND_LEVEL,
                     n_resamples: int = DEFAULT_BAND_RESAMPLES, seed: int = 0,
                     max_cells: int = DEFAULT_MAX_CELLS):
    """Consistency band of the CORP curve under the hypothesis that ``p`` is calibrated.

    Parameters
    ----------
    p : array-like of shape (n,)
        Forecast probabilities (validated by the caller or :func:`corp_curve`).
    level : float, default=0.9
        Central coverage of the band at each forecast value.
    n_resamples : int, default=DEFAULT_BAND_RESAMPLES
    seed : int, default=0
        Seed of ``numpy.random.default_rng``; the band is a function of (p, settings).
    max_cells : int, default=DEFAULT_MAX_CELLS
        Distinct forecasts above which cells are pooled (module docstring).

    Returns
    -------
    (band_x, lower, upper) : ndarrays
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) \
            or n_resamples < 10:
        raise ValueError(f"n_resamples must be an integer >= 10, got {n_resamples!r}")
    if isinstance(max_cells, bool) or not isinstance(max_cells, (int, np.integer)) \
            or max_cells < 2:
        raise ValueError(f"max_cells must be an integer >= 2, got {max_cells!r}")
    x, count = np.unique(np.asarray(p, dtype=np.float64), return_counts=True)
    x, count = _cells(x, count, int(max_cells))
    rng = np.random.default_rng(seed)
    # every resample at once: one binomial draw per (resample, cell)
    k = rng.binomial(count[None, :], x[None, :], size=(int(n_resamples), x.size))
    weights = count.astype(np.float64)
    refits = np.empty(k.shape)
    for r in range(k.shape[0]):
        refits[r] = pava(k[r] / weights, weights)
    lower, upper = np.quantile(refits, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=0)
    return x, lower, upper


def corp_curve(y, p, *, level: float = DEFAULT_BAND_LEVEL,
               n_resamples: int = DEFAULT_BAND_RESAMPLES, seed: int = 0,
               max_cells: int = DEFAULT_MAX_CELLS) -> CorpCurve:
    """The CORP reliability curve of ``(y, p)`` with its consistency band.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    p : array-like of shape (n,)
        Forecast probabilities of the positive class.
    level, n_resamples, seed, max_cells
        The band, as in :func:`consistency_band`.

    Returns
    -------
    CorpCurve
    """
    x, fitted, weight = isotonic_recalibration(y, p)
    band_x, lower, upper = consistency_band(p, level=level, n_resamples=n_resamples, seed=seed,
                                            max_cells=max_cells)
    return CorpCurve(x, fitted, weight, band_x, lower, upper, float(level), int(n_resamples),
                     int(seed), int(band_x.size))
