"""``searchsorted`` from standard ONNX operators: per score, the number of table entries <= it.

ONNX has no searchsorted/bucketize op, so the count is built from core ops. Three designs, all
exact (they only compare, gather and add integers):

* ``"lut"`` -- a uniform grid of ``G = 2**k`` cells. The cell of a score is
  ``Floor((x - origin) * scale)`` clipped to the grid; a look-up table gives the number of
  entries in earlier cells, and a branchless binary search over the few entries sharing the cell
  finishes the count. Rounding is monotone, so computing the table entries' cells with the *same*
  dtype operations in numpy gives an exact partition: entries in earlier cells are < x, entries in
  later cells are > x, whatever the rounding. The grid may even be computed in float32 for a
  float64 graph (a monotone cast keeps the argument), which makes it cheaper. ``G`` is chosen at
  export so that a cell holds few entries (``rounds = ceil(log2(max occupancy + 1))``).
* ``"bsearch"`` -- the same branchless binary search over the whole table (ceil(log2(K+1))
  rounds), no grid.
* ``"broadcast"`` -- ``ReduceSum(table <= x[:, None])``: O(N*K) time *and memory*.

``"auto"`` is lut: ``benchmarks/bench_onnx.py`` measured it fastest at every K tried (10 to
1e5); broadcast and an ai.onnx.ml TreeEnsemble were slower even at K = 10.

NaN scores: comparisons with NaN are false, so bsearch and broadcast count 0; the lut path
replaces NaN by 0 before its float->int ``Cast`` (a NaN cast is undefined in ONNX), so every index
stays in range. The callers turn the result into NaN afterwards.
"""

from __future__ import annotations


import numpy as np
from onnx import TensorProto

from mlcal.onnx._graph import ONNX_FLOAT_TYPES, GraphBuilder

SEARCH_METHODS = ("auto", "lut", "bsearch", "broadcast")
MAX_LUT_CELLS = 2 ** 20
# a look-up table beyond this many cells stops fitting in cache; one more search round is cheaper
LUT_CACHE_CELLS = 2 ** 16
INDEX_DTYPE = np.int32
_ONNX_INDEX = TensorProto.INT32


def round_up(values, dtype) -> np.ndarray:
    """The smallest number of ``dtype`` >= each float64 value.

    For any ``x`` of that dtype, ``x >= v`` exactly when ``x >= round_up(v)``; this is what makes
    float32 threshold tables give the same bins as float64 ``searchsorted`` on float32 inputs.
    """
    v = np.asarray(values, dtype=np.float64)
    if np.dtype(dtype) == np.float64:
        return v.copy()
    with np.errstate(over="ignore"):
        r = v.astype(dtype)
    low = r.astype(np.float64) < v
    r[low] = np.nextafter(r[low], np.array(np.inf, dtype=dtype))
    return r


def round_down(values, dtype) -> np.ndarray:
    """The largest number of ``dtype`` <= each float64 value."""
    return -round_up(-np.asarray(values, dtype=np.float64), dtype)


def gather(g: GraphBuilder, table: str, idx: str, hint: str) -> str:
    """``table[idx]`` for a 1-D table. ``GatherElements`` means the same as ``Gather(axis=0)``
    here and is ~10x faster in onnxruntime (1e6 indices: 2 ms vs 20-25 ms)."""
    return g.op("GatherElements", [table, idx], hint, axis=0)


def _grid(values: np.ndarray, n_cells: int):
    """Grid origin (None = 0, saving a Sub) and scale in ``values``' dtype; the scale is finite
    and > 0 whatever the span."""
    dtype = values.dtype.type
    finite = values[np.isfinite(values)]
    first, last = (float(finite[0]), float(finite[-1])) if finite.size else (0.0, 1.0)
    origin = None if 0.0 <= first <= 0.25 * last else dtype(first)
    span = last - (0.0 if origin is None else first)
    with np.errstate(over="ignore"):
        scale = dtype(n_cells / span) if span > 0 else dtype(1.0)
    if not np.isfinite(scale) or scale <= 0:
        scale = dtype(np.finfo(dtype).max / 4)
    return origin, scale


def cells_of(values: np.ndarray, origin, scale, n_cells: int) -> np.ndarray:
    """Cell index, computed with exactly the graph's operations in ``values``' dtype."""
    with np.errstate(over="ignore", invalid="ignore"):
        off = values if origin is None else values - origin
        c = np.floor(off * scale)
    return np.clip(c, 0, n_cells - 1).astype(np.int64)


def _grid_values(table: np.ndarray, grid_dtype) -> np.ndarray:
    with np.errstate(over="ignore"):
        return table.astype(grid_dtype)   # round to nearest, like ONNX Cast


def ceil_log2(m: int) -> int:
    """``ceil(log2(m))`` for an integer ``m >= 1``, exactly (bit length, no float logarithm)."""
    return (int(m) - 1).bit_length()


def plan_lut(table: np.ndarray, max_cells: int = MAX_LUT_CELLS) -> dict:
    """Choose the grid dtype and size: fewest search rounds (a table beyond the cache counts as
    one more round), then float32 over float64, then the smaller table."""
    k = table.size
    log_k = ceil_log2(max(k, 1))
    start = max(16, 1 << max(0, log_k - 1))
    cap = max(start, min(max_cells, max(4096, 16 << log_k)))
    grid_dtypes = [np.float32] + ([np.float64] if table.dtype == np.float64 else [])
    best = None
    for grid_dtype in grid_dtypes:
        gv = _grid_values(table, grid_dtype)
        n_cells = start
        while n_cells <= cap:
            origin, scale = _grid(gv, n_cells)
            cells = cells_of(gv, origin, scale, n_cells)
            rounds = ceil_log2(int(np.bincount(cells, minlength=n_cells).max()) + 1)
            cost = rounds + (n_cells > LUT_CACHE_CELLS)
            if best is None or cost < best["cost"]:
                best = {"n_cells": n_cells, "origin": origin, "scale": scale, "rounds": rounds,
                        "cost": cost, "grid_dtype": np.dtype(grid_dtype), "cells": cells}
            if rounds <= 1:
                break
            n_cells *= 2
    counts = np.bincount(best["cells"], minlength=best["n_cells"])
    # before[c] = number of entries in cells < c
    best["before"] = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(INDEX_DTYPE)
    return best


def _search_table(table: np.ndarray, rounds: int) -> np.ndarray:
    """``[pad] + table + NaN padding``: index ``pos + step`` reads ``table[pos + step - 1]``; NaN
    compares false, so probes past the end never advance."""
    pad = np.full(max(1, 1 << max(rounds - 1, 0)), np.nan, dtype=table.dtype)
    return np.concatenate((pad[:1], table, pad))


def _advance(g: GraphBuilder, pos: str | None, cond: str, step: int) -> str:
    """``pos + step * cond`` in integer arithmetic (cheaper than ``Where`` in onnxruntime)."""
    inc = g.op("Cast", [cond], "le_int", to=_ONNX_INDEX)
    if step > 1:
        inc = g.op("Mul", [inc, g.const(INDEX_DTYPE(step), "step")], "advance")
    return inc if pos is None else g.op("Add", [pos, inc], "pos")


def _bsearch_rounds(g: GraphBuilder, x: str, table: np.ndarray, pos: str | None, rounds: int,
                    first_probe: str | None = None) -> str:
    """Branchless binary search: each round reads ``table[pos + step - 1]`` and advances ``pos``
    by ``step`` when that entry is <= x. ``pos=None`` starts at 0 (the first probe is then a
    constant); ``first_probe`` is the first round's entry when the caller already gathered it."""
    t1 = None
    for r in reversed(range(rounds)):
        step = 1 << r
        if pos is None:
            probe_val = g.const(table[step - 1], "probe")
        elif first_probe is not None and r == rounds - 1:
            probe_val = first_probe
        else:
            if t1 is None:
                t1 = g.const(_search_table(table, rounds), "search_table")
            probe = g.op("Add", [pos, g.const(INDEX_DTYPE(step), "step")], "probe_idx")
            probe_val = gather(g, t1, probe, "probe_val")
        pos = _advance(g, pos, g.op("LessOrEqual", [probe_val, x], "le"), step)
    return pos


def _lut_search(g: GraphBuilder, x: str, table: np.ndarray) -> str:
    plan = plan_lut(table)
    n_cells, gdt = plan["n_cells"], plan["grid_dtype"]
    xg = x if gdt == table.dtype else g.op("Cast", [x], "x_grid", to=ONNX_FLOAT_TYPES[gdt.name])
    # NaN -> 0 before the float->int Cast (undefined for NaN); the count itself still compares
    # the original x, so a NaN score gets some valid index and the caller makes it NaN
    xg = g.op("Where", [g.op("IsNaN", [xg], "isnan"), g.const(gdt.type(0), "zero"), xg],
              "x_grid_safe")
    if plan["origin"] is not None:
        xg = g.op("Sub", [xg, g.const(plan["origin"], "grid_origin")], "grid_off")
    m = g.op("Mul", [xg, g.const(plan["scale"], "grid_scale")], "grid_pos")
    # Floor before the clip and cast: ONNX leaves the float->int rounding mode unspecified
    f = g.op("Floor", [m], "grid_floor")
    c = g.op("Clip", [f, g.const(gdt.type(0), "zero"), g.const(gdt.type(n_cells - 1), "last")],
             "grid_clip")
    cell = g.op("Cast", [c], "cell", to=_ONNX_INDEX)
    pos = gather(g, g.const(plan["before"], "lut"), cell, "lut_pos")
    rounds = plan["rounds"]
    if rounds == 0:
        return pos
    first = None
    if n_cells <= LUT_CACHE_CELLS:
        # the first probe of every cell, looked up by cell: saves an Add and reads a small table
        t1 = _search_table(table, rounds)
        first = gather(g, g.const(t1[plan["before"] + (1 << (rounds - 1))], "first_probe"),
                       cell, "probe_val")
    return _bsearch_rounds(g, x, table, pos, rounds, first)


def resolve_method(method, k: int):
    """The concrete search design for a table of ``k`` entries (callables pass through)."""
    if callable(method):
        return method
    if method not in SEARCH_METHODS:
        raise ValueError(f"index_search must be one of {SEARCH_METHODS}, got {method!r}")
    return "lut" if method == "auto" else method


def count_leq(g: GraphBuilder, x: str, table: np.ndarray, method="auto") -> str:
    """Add nodes computing ``#{i: table[i] <= x}`` (int32, shape of ``x``).

    ``table`` must be sorted (non-decreasing), finite, non-empty and of the graph's float dtype.
    NaN in ``x`` yields some in-range count (the caller masks it). ``method`` may also be a
    callable ``(g, x, table) -> name`` (the benchmark uses this to try other designs).
    """
    method = resolve_method(method, table.size)
    if callable(method):
        return method(g, x, table)
    if method == "broadcast":
        xu = g.op("Unsqueeze", [x, g.const(np.array([1], dtype=np.int64), "axes")], "x_col")
        le = g.op("LessOrEqual", [g.const(table, "table"), xu], "le")
        ints = g.op("Cast", [le], "le_int", to=_ONNX_INDEX)
        return g.op("ReduceSum", [ints, g.const(np.array([1], dtype=np.int64), "axes")],
                    "count", keepdims=0)
    if method == "bsearch":
        return _bsearch_rounds(g, x, table, None, ceil_log2(table.size + 1))
    return _lut_search(g, x, table)
