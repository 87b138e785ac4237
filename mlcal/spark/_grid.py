"""The score grid of grid-mode fitting, and the error bound it implies for the fitted map.

A grid is a set of strictly increasing interior edges over the observed score range
``[s_min, s_max]``; cell ``k`` is ``[lo_k, hi_k)`` (the last one closed) and every score in it is
replaced by the cell's midpoint ``r_k`` (so no score moves by more than half its cell). The
calibrator is then fitted exactly on the rounded rows. For the fitted map ``f`` and any score
``s`` in the range, ``|f(s) - f(r_cell(s))| <= max_k osc(f, [lo_k, hi_k])``, the largest
oscillation of ``f`` over a cell: the fit cannot tell scores inside a cell apart, and this is how
far its predictions move within the resolution it was given (:func:`grid_error`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlcal.maps import CalibrationMap, apply_input_transform
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
        ``n`` when the edges are exactly ``s_min + (s_max - s_min) * (i / n)``, i = 1..n-1
        (Spark then finds a cell by arithmetic instead of a search through an edge table).
    """

    edges: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    representatives: np.ndarray
    max_shift: float
    uniform_cells: int | None = None


def make_grid(grid, s_min: float, s_max: float) -> GridInfo:
    """Build the grid: ``grid`` is a number of equal cells over ``[s_min, s_max]`` or an array
    of strictly increasing finite edges (edges outside the range are dropped)."""
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
    lower = np.concatenate(([s_min], edges))
    upper = np.concatenate((edges, [s_max]))
    reps = lower + 0.5 * (upper - lower)
    shift = float(np.max(np.maximum(reps - lower, upper - reps)))
    return GridInfo(edges, lower, upper, reps, shift, uniform)


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
