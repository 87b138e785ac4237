"""The score grid of grid-mode fitting, and the error bound it implies for the fitted map.

A grid is a set of strictly increasing interior edges over the observed score range
``[s_min, s_max]``; cell ``k`` is ``[lo_k, hi_k)`` (the last one closed) and every score in it is
replaced by the cell's midpoint ``r_k`` (so no score moves by more than half its cell). The
calibrator is then fitted exactly on the rounded rows. For the fitted map ``f`` and any score
``s`` in the range, ``|f(s) - f(r_cell(s))| <= max_k osc(f, [lo_k, hi_k])``, the largest
oscillation of ``f`` over a cell: the fit cannot tell scores inside a cell apart, and this is how
far its predictions move within the resolution it was given (:func:`grid_error`).

Saturated probability scores (naive Bayes: many below ``2^-40``, or within ``2^-40`` of 1) all
fall into the first (last) of equal cells over ``[0, 1]``; the default grid then refines those
two cells with one cell per binade, ``[2^-k, 2^-(k-1))`` and ``[1 - 2^-(k-1), 1 - 2^-k)``, down
to the data's logit clamp (:func:`binade_edges`): at most 1022 + 53 more cells, whose
midpoints are within a factor 3/2 of every score (of ``1 - s`` near 1) in them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mlcal.maps import BETA_EPS, CalibrationMap, apply_input_transform
from mlcal.plotting import map_breaks as breakpoints   # one break-point registry per map type


@dataclass(frozen=True)
class GridInfo:
    """A score grid: interior ``edges`` and one representative score per cell.

    Attributes
    ----------
    edges : ndarray of shape (K-1,)
        Strictly increasing cell boundaries inside ``(s_min, s_max]``; a score equal to an edge
        belongs to the upper cell.
    lower, upper, representatives : ndarray of shape (K,)
        Each cell's bounds (``s_min``/``s_max`` outside) and the score its rows are given (the
        midpoint).
    max_shift : float
        The largest distance a score is moved (half the widest cell).
    uniform_cells : int or None
        ``n`` when the edges are exactly ``s_min + (s_max - s_min) * (i / n)``, i = 1..n-1,
        besides ``low_edges`` and ``high_edges`` (Spark then finds a cell by arithmetic
        instead of a search through an edge table).
    low_edges, high_edges : ndarray
        The binade edges refining the first and the last of the ``n`` equal cells
        (:func:`binade_edges`; empty unless the scores saturate). Included in ``edges``.
    """

    edges: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    representatives: np.ndarray
    max_shift: float
    uniform_cells: int | None = None
    low_edges: np.ndarray = field(default_factory=lambda: np.empty(0))
    high_edges: np.ndarray = field(default_factory=lambda: np.empty(0))


def make_grid(grid, s_min: float, s_max: float,
              refine: tuple[float, float] | None = None) -> GridInfo:
    """Build the grid: ``grid`` is a number of equal cells over ``[s_min, s_max]`` or an array
    of strictly increasing finite edges (edges outside the range are dropped). ``refine``: the
    logit clamp ``(lo, hi)`` of the data, for probability scores: the first and the last cell
    get the binade edges of :func:`binade_edges`."""
    uniform = None
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
        if grid < 1:
            raise ValueError(f"grid must be a positive number of cells, got {grid}")
        uniform = int(grid)
        edges = uniform_edges(s_min, s_max, uniform)
    else:
        try:
            edges = np.asarray(grid, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("grid must be an int (number of cells) or a 1-D array of edges") \
                from None
        if edges.ndim != 1 or not np.isfinite(edges).all() or np.any(np.diff(edges) <= 0):
            raise ValueError("grid edges must be a 1-D array of finite, strictly increasing "
                             "numbers")
    kept = np.unique(edges[(edges > s_min) & (edges <= s_max)])
    if kept.size != edges.size:
        uniform = None          # a range too narrow for n distinct edges: use the edge table
    edges = kept
    low = high = np.empty(0)
    if refine is not None:
        low, high = binade_edges(edges, s_min, s_max, *refine)
        edges = np.unique(np.concatenate((low, edges, high)))
    lower = np.concatenate(([s_min], edges))
    upper = np.concatenate((edges, [s_max]))
    reps = lower + 0.5 * (upper - lower)
    shift = float(np.max(np.maximum(reps - lower, upper - reps)))
    return GridInfo(edges, lower, upper, reps, shift, uniform, low, high)


def binade_edges(edges: np.ndarray, s_min: float, s_max: float, lo: float,
                 hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The edges refining a grid's first and last cell where probability scores saturate.

    When the logit clamp's ``lo`` (the smallest positive score of the data, see
    :func:`~mlcal.maps.binary.data_clamp`) is below ``BETA_EPS``: every ``2^-k`` inside the
    first cell ``(s_min, edges[0])`` down to ``2^-k <= lo``; when ``hi`` is above
    ``1 - BETA_EPS``: every ``1 - 2^-k`` inside the last cell ``(edges[-1], s_max]`` up to
    ``1 - 2^-k <= hi``. All exact doubles (``k <= 1022``, and ``k <= 53`` near 1), found from
    the exponents of ``lo`` and ``1 - hi`` (exact, ``frexp``), so no decision depends on a
    rounded logarithm. Without saturation both are empty and the grid is unchanged."""
    first = float(edges[0]) if edges.size else s_max
    last = float(edges[-1]) if edges.size else s_min
    low = high = np.empty(0)
    if lo < BETA_EPS:
        k_max = 1 - math.frexp(lo)[1]          # 2^-k_max <= lo < 2^(1-k_max)
        k = np.arange(1, k_max + 1)
        b = np.ldexp(1.0, -k)
        low = np.sort(b[(b > s_min) & (b < first)])
    if hi > 1.0 - BETA_EPS:
        k_max = 1 - math.frexp(1.0 - hi)[1]    # 1 - hi is exact (hi > 1/2)
        k = np.arange(1, min(k_max, 53) + 1)
        b = 1.0 - np.ldexp(1.0, -k)
        high = np.sort(b[(b > last) & (b <= s_max)])
    return low, high


def uniform_edges(s_min: float, s_max: float, n: int) -> np.ndarray:
    """The interior edges of ``n`` equal cells (the formula Spark evaluates per cell too)."""
    return s_min + (s_max - s_min) * (np.arange(1, n) / n)


def grid_error(m: CalibrationMap, grid: GridInfo) -> float:
    """``max_k (max f - min f)`` over the cells ``[lower_k, upper_k]`` of the fitted map ``f``.

    Between consecutive breakpoints a map is monotone, so a cell's extremes are among its two
    ends and the breakpoints inside it (for a step map, a threshold carries the upper value and
    the lower one is the value at the previous point)."""
    u_lo = apply_input_transform(grid.lower, m.input_transform)
    u_hi = apply_input_transform(grid.upper, m.input_transform)
    f_lo, f_hi = m._evaluate(u_lo), m._evaluate(u_hi)
    osc = np.abs(f_hi - f_lo)
    b = np.asarray(breakpoints(m), dtype=np.float64)
    if b.size:
        first = np.searchsorted(b, u_lo, side="left")
        last = np.searchsorted(b, u_hi, side="right")
        f_b = m._evaluate(b)
        for k in np.flatnonzero(last > first):
            vals = np.concatenate((f_b[first[k]:last[k]], [f_lo[k], f_hi[k]]))
            osc[k] = vals.max() - vals.min()
    return float(osc.max())
