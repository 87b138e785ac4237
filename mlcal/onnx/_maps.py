"""Calibration map -> ONNX nodes (standard ai.onnx operators only).

Each map class has one builder, registered with :func:`map_subgraph` (dispatch on the class):

* ``StepMap``: ``values[count(thresholds <= s)]`` -- an index search (see ``_search``) plus
  ``Gather``. With the sigmoid input transform the thresholds are pulled back to raw-score space
  at export (the smallest float64 ``s`` with ``expit(s) >= t``), so the graph never evaluates
  ``exp`` and the bins are exactly the ones ``predict`` picks.
* ``LinearMap``: numpy's interpolation formula ``slope[j] * (s - x[j]) + y[j]`` (np.interp's
  C loop, same operations in the same order) with ``j + 1 = count(x <= s)``; slopes are
  precomputed as numpy does, ``(y[j+1] - y[j]) / (x[j+1] - x[j])``. The per-segment tables get
  one extra entry on each side with slope 0, which gives np.interp's flat extrapolation without a
  ``Clip`` and its exact values at the knots (``slope * 0 + y[j]``). In float64 this is
  bit-identical to ``np.interp``. In float32 each knot is split into a float32 head and tail
  (``x = hi + lo``) so ``s - x[j]`` stays accurate on segments narrower than a float32 ulp (steep
  isotonic pieces); see ``_bounds.error_bound``.
* ``SigmoidMap``: ``1 / (1 + Exp(a * s + b))`` with ``Mul``, ``Add``, ``Exp``, ``Add``, ``Div``:
  the operation order of ``scipy.special.expit(-(a*s + b))``. (ONNX's ``Sigmoid`` op is not
  used: onnxruntime's float64 kernel is accurate only in absolute terms, ~2e-16, and flushes
  ``expit(-40)`` and below to 0.) A positive output ``floor`` adds ``Clip(p, floor, 1 - floor)``
  (BetaMap likewise, in float64).

* ``BetaMap``: ``expit(a * Log(s) - b * Log(1 - s) + c)`` with ``s`` clipped to the map's
  clamp ``[lo, hi]`` (default ``[BETA_EPS, 1 - BETA_EPS]``), always computed in float64 (a
  float32 graph casts its input up and the probability down: float32 cannot hold
  ``1 - BETA_EPS`` nor a ``lo`` below 2**-149, so clipping there would
  move scores of exactly 1 far from where ``predict`` puts them). ONNX has no ``log1p``, so
  ``ln(1 - s)`` is ``Log(1 - s)``: exact subtraction for ``s >= 1/2`` (Sterbenz), an absolute
  error below 2**-53 otherwise, against ``predict``'s ``log1p(-s)``; see ``_bounds``.

* ``QuadraticMap``: ``expit(((a * z) + (b * (z * z))) + c)`` in float64 (a float32 graph casts
  up and down as for BetaMap), with ``z = Log(s) - Log(1 - s)`` of ``s`` clipped to the
  map's clamp ``[lo, hi]`` (``on="logit"``) or the score itself (``on="margin"``, where the
  graph's ``eta`` has ``predict``'s bits and only ``Exp`` differs); see ``_bounds``.

* ``OffsetMap``: the inner map's nodes, then ``expit((Log(p) - Log(1 - p)) + delta)``, all in
  float64 (a float32 graph casts its scores up and the probability down).

Non-finite scores (NaN, +-inf) give NaN, as ``predict`` rejects them: the index search keeps
every index valid for NaN (see ``_search``) and the result gets ``score - score`` added (+0, or
NaN), two cheap ops instead of a ``Where``.
"""

from __future__ import annotations

import functools

import numpy as np

from mlcal._dispatch import registered_types
from onnx import TensorProto

from mlcal.maps import (BetaMap, LinearMap, QuadraticMap, SigmoidMap, StepMap,
                        apply_input_transform)
from mlcal.maps.offset import OffsetMap
from mlcal.onnx._graph import GraphBuilder
from mlcal.onnx._search import count_leq, gather, resolve_method, round_down, round_up

_NEG_MASK = np.int64(0x7FFFFFFFFFFFFFFF)


def _ordered_keys(x: np.ndarray) -> np.ndarray:
    """float64 -> int64 keys with the same order (-0.0 and 0.0 share key 0)."""
    bits = x.view(np.int64)
    return np.where(bits < 0, -(bits & _NEG_MASK), bits)


def _from_keys(keys: np.ndarray) -> np.ndarray:
    bits = np.where(keys < 0, (-keys) | np.int64(-(2 ** 63)), keys)
    return bits.astype(np.int64).view(np.float64)


def pull_back_sigmoid(thresholds: np.ndarray) -> np.ndarray:
    """For each probability threshold ``t``, the smallest float64 ``s`` with ``expit(s) >= t``
    (``-inf`` when every score passes, ``+inf`` when none does).

    Bisection over the ordered float64 bit patterns with the very ``expit`` that ``predict``
    uses, so ``expit(s) >= t`` exactly when ``s >= result`` (``expit`` is non-decreasing).
    """
    t = np.asarray(thresholds, dtype=np.float64)
    big = np.finfo(np.float64).max

    def passes(s):
        return apply_input_transform(s, "sigmoid") >= t

    out = np.full(t.shape, np.inf)
    always = passes(np.full(t.shape, -big))
    never = ~passes(np.full(t.shape, big))
    out[always] = -np.inf
    todo = ~(always | never)
    lo = np.full(t.shape, _ordered_keys(np.array([-big]))[0])   # passes() is False here
    hi = np.full(t.shape, _ordered_keys(np.array([big]))[0])    # and True here
    while True:
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)             # floor((lo+hi)/2), no overflow
        active = todo & (mid > lo)
        if not active.any():
            break
        ok = passes(_from_keys(mid))
        hi = np.where(active & ok, mid, hi)
        lo = np.where(active & ~ok, mid, lo)
    out[todo] = _from_keys(hi)[todo]
    return out


def _non_finite_to_nan(g: GraphBuilder, raw: str, y: str) -> str:
    """``y + (raw - raw)``: unchanged for finite scores (``raw - raw == +0``), NaN for NaN and
    +-inf, which ``predict`` rejects too. Two cheap ops instead of a ``Where``."""
    return g.op("Add", [y, g.op("Sub", [raw, raw], "zero_or_nan")], "p")


def sigmoid_nodes(g: GraphBuilder, x: str, dtype: np.dtype) -> str:
    """``1 / (1 + exp(-x))``: scipy's expit, operation by operation."""
    one = g.const(dtype.type(1.0), "one")
    e = g.op("Exp", [g.op("Neg", [x], "neg")], "exp")
    return g.op("Div", [one, g.op("Add", [e, one], "one_plus")], "expit")


def step_tables(m: StepMap, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The comparison table (graph dtype, sorted, finite) and the values it indexes.

    Thresholds are rounded *up* to the graph dtype: for x of that dtype, ``x >= t`` exactly when
    ``x >= round_up(t)``, so float32 graphs pick the same bin as float64 ``searchsorted``.
    """
    t = m.thresholds
    if m.input_transform == "sigmoid":
        t = pull_back_sigmoid(t)
    table = round_up(t, dtype)
    always = int(np.count_nonzero(table == -np.inf))   # every score passes: shift the values
    finite = table[np.isfinite(table)]                  # +inf: no finite score reaches it
    values = m.values[always:always + finite.size + 1].astype(dtype)
    return finite, values


def step_nodes(g: GraphBuilder, x: str, m: StepMap, dtype: np.dtype, method) -> str:
    table, values = step_tables(m, dtype)
    if table.size == 0:   # one bin: a constant, broadcast to x's shape
        return _non_finite_to_nan(g, x, g.const(values[0], "value"))
    y = gather(g, g.const(values, "values"), count_leq(g, x, table, method), "step_value")
    return _non_finite_to_nan(g, x, y)


def linear_slopes(m: LinearMap) -> np.ndarray:
    """numpy's interp slopes in float64, with a final 0 for the flat right end."""
    x, y = m.knots, m.values
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        slopes = (y[1:] - y[:-1]) / (x[1:] - x[:-1])
    if not np.isfinite(slopes).all():
        j = int(np.flatnonzero(~np.isfinite(slopes))[0])
        raise ValueError(f"linear map: knots {j} and {j + 1} ({float(x[j])!r}, "
                         f"{float(x[j + 1])!r}) are so close "
                         "that the slope between them overflows float64; such a map cannot be "
                         "evaluated reliably (np.interp returns inf inside that segment)")
    return np.append(slopes, 0.0)


def linear_tables(m: LinearMap, dtype: np.dtype) -> dict:
    """Constants of the linear-map subgraph in the graph dtype.

    ``table`` holds the K knots (rounded up in float32, like step thresholds) so that
    ``i = count(table <= s)`` is numpy's segment index plus one; the per-segment arrays have
    K + 1 entries, entry 0 (left of the first knot) with slope 0 and the first value, so no
    clipping is needed: slope 0 also makes the right end flat.
    """
    x, y = m.knots, m.values
    slopes = np.concatenate(([0.0], linear_slopes(m)))
    head = np.concatenate((x[:1], x)).astype(dtype)
    big = np.finfo(dtype).max
    # (s - head) cannot overflow for finite s while |knots| < big / 2**64: skip the Clip
    clip = bool(np.abs(x).max() >= big * 2.0 ** -64)
    tables = {"table": round_up(x, dtype), "head": head, "tail": None,
              "slope": np.clip(slopes, -big, big).astype(dtype),
              "value": np.concatenate((y[:1], y)).astype(dtype),
              "clip": (round_down(x[:1], dtype)[0], round_up(x[-1:], dtype)[0]) if clip else None}
    if dtype != np.float64:
        # x = head + tail (+ a residual below float32 resolution) keeps s - x accurate on
        # segments narrower than a float32 ulp; skipped when the knots' rounding moves no output
        # by more than half a float32 ulp (e.g. knots that are float32 numbers already)
        tail = (np.concatenate((x[:1], x)) - head.astype(np.float64)).astype(dtype)
        if np.any(np.abs(slopes * tail.astype(np.float64)) > 2.0 ** -25):
            tables["tail"] = tail
    return tables


def linear_nodes(g: GraphBuilder, x: str, m: LinearMap, dtype: np.dtype, method) -> str:
    raw = x
    if m.input_transform == "sigmoid":
        x = sigmoid_nodes(g, x, dtype)
    if m.size == 1:   # np.interp with one knot is that knot's value everywhere
        return _non_finite_to_nan(g, raw, g.const(m.values[:1].astype(dtype)[0], "value"))
    c = linear_tables(m, dtype)
    if c["clip"] is not None:
        x = g.op("Clip", [x, g.const(c["clip"][0], "knot_lo"), g.const(c["clip"][1], "knot_hi")],
                 "x_clip")
    i = count_leq(g, x, c["table"], method)

    def at_i(arr, hint):
        return gather(g, g.const(arr, hint), i, hint + "_i")

    # numpy's formula and order: slope[j] * (s - x[j]) + y[j]
    d = g.op("Sub", [x, at_i(c["head"], "knot")], "dx")
    if c["tail"] is not None:
        d = g.op("Sub", [d, at_i(c["tail"], "knot_tail")], "dx_exact")
    y = g.op("Add", [g.op("Mul", [at_i(c["slope"], "slope"), d], "rise"),
                     at_i(c["value"], "value")], "interp")
    if dtype == np.float64 and c["clip"] is None and raw == x:
        # NaN propagates through s - x[j]; +-inf meets slope 0 at the ends: 0 * inf = NaN
        return y
    if dtype != np.float64:
        # the true value lies in [0, 1]; clipping float32 rounding back into it only helps
        y = g.op("Clip", [y, g.const(dtype.type(0), "zero"), g.const(dtype.type(1), "one")],
                 "interp01")
    # Clip's result for NaN is unspecified by ONNX: put NaN back explicitly
    return _non_finite_to_nan(g, raw, y)


def sigmoid_map_nodes(g: GraphBuilder, x: str, m: SigmoidMap, dtype: np.dtype) -> str:
    raw = x
    if m.input_transform == "sigmoid":
        x = sigmoid_nodes(g, x, dtype)
    one = g.const(dtype.type(1.0), "one")
    z = g.op("Add", [g.op("Mul", [x, g.const(dtype.type(m.a), "a")], "a_s"),
                     g.const(dtype.type(m.b), "b")], "z")
    e = g.op("Exp", [z], "exp_z")
    p = floor_nodes(g, g.op("Div", [one, g.op("Add", [e, one], "one_plus")], "sigmoid"),
                    m.floor, dtype)
    return _non_finite_to_nan(g, raw, p)


def floor_nodes(g: GraphBuilder, p: str, floor: float, dtype: np.dtype) -> str:
    """``Clip(p, floor, 1 - floor)``, the output floor of a parametric map (nothing when the
    floor is 0); ``1 - floor`` is rounded in float64 first, as ``predict`` does."""
    if floor == 0.0:
        return p
    return g.op("Clip", [p, g.const(dtype.type(floor), "floor_lo"),
                         g.const(dtype.type(1.0 - floor), "floor_hi")], "floored")


@functools.singledispatch
def map_subgraph(m, g: GraphBuilder, x: str, dtype: np.dtype, method) -> tuple[str, str]:
    """The per-map-type ONNX builder: one ``map_subgraph.register(MapClass)`` per map type,
    returning ``(output name, index search actually used or "none")``."""
    raise ValueError(f"cannot export {type(m).__name__}: no ONNX builder is registered for it "
                     f"(expected one of {registered_types(map_subgraph)})")


@map_subgraph.register
def _(m: StepMap, g: GraphBuilder, x: str, dtype: np.dtype, method) -> tuple[str, str]:
    table, _ = step_tables(m, dtype)
    used = resolve_method(method, table.size) if table.size else "none"
    return step_nodes(g, x, m, dtype, method), used


@map_subgraph.register
def _(m: LinearMap, g: GraphBuilder, x: str, dtype: np.dtype, method) -> tuple[str, str]:
    used = resolve_method(method, m.size) if m.size > 1 else "none"
    return linear_nodes(g, x, m, dtype, method), used


@map_subgraph.register
def _(m: SigmoidMap, g: GraphBuilder, x: str, dtype: np.dtype, method) -> tuple[str, str]:
    resolve_method(method, 0)   # still validate the argument
    return sigmoid_map_nodes(g, x, m, dtype), "none"


# -- BetaMap and QuadraticMap: float64 maps of the clamped score's logarithms ------------------
def _float64_score(g: GraphBuilder, x: str, m, dtype: np.dtype, prefix: str) -> str:
    """The score as ``predict`` sees it: cast to float64, through the sigmoid for margins."""
    if dtype != np.float64:
        x = g.op("Cast", [x], f"{prefix}_in64", to=TensorProto.DOUBLE)
    if m.input_transform == "sigmoid":
        x = sigmoid_nodes(g, x, np.dtype(np.float64))
    return x


def _clamped_logs(g: GraphBuilder, x: str, clamp: tuple[float, float],
                  prefix: str) -> tuple[str, str]:
    """``Log(s)`` and ``Log(1 - s)`` of ``s = Clip(x, lo, hi)`` in float64, ``(lo, hi)`` the
    map's clamp."""
    s = g.op("Clip", [x, g.const(np.float64(clamp[0]), f"{prefix}_lo"),
                      g.const(np.float64(clamp[1]), f"{prefix}_hi")], f"{prefix}_s")
    log_s = g.op("Log", [s], f"{prefix}_log_s")
    log_1ms = g.op("Log", [g.op("Sub", [g.const(np.float64(1.0), "one"), s],
                                f"{prefix}_one_minus_s")], f"{prefix}_log_1ms")
    return log_s, log_1ms


def _floored_output(g: GraphBuilder, eta: str, raw: str, m, dtype: np.dtype, prefix: str) -> str:
    """scipy's expit of the float64 linear predictor, the map's floor, the graph's dtype, and
    NaN restored for non-finite scores."""
    p = floor_nodes(g, sigmoid_nodes(g, eta, np.dtype(np.float64)), m.floor,
                    np.dtype(np.float64))
    if dtype != np.float64:
        p = g.op("Cast", [p], f"{prefix}_out", to=TensorProto.FLOAT)
    # Clip's result for NaN is unspecified by ONNX: put NaN back explicitly
    return _non_finite_to_nan(g, raw, p)


def beta_map_nodes(g: GraphBuilder, x: str, m: BetaMap, dtype: np.dtype) -> str:
    """``((a * ln s) - (b * ln(1 - s))) + c`` in ``predict``'s order, then scipy's expit."""
    log_s, log_1ms = _clamped_logs(g, _float64_score(g, x, m, dtype, "beta"), m.clamp, "beta")
    z = g.op("Sub", [g.op("Mul", [g.const(np.float64(m.a), "beta_a"), log_s], "a_log_s"),
                     g.op("Mul", [g.const(np.float64(m.b), "beta_b"), log_1ms], "b_log_1ms")],
             "beta_ab")
    eta = g.op("Add", [z, g.const(np.float64(m.c), "beta_c")], "beta_z")
    return _floored_output(g, eta, x, m, dtype, "beta")


@map_subgraph.register
def _(m: BetaMap, g: GraphBuilder, x: str, dtype: np.dtype, method) -> tuple[str, str]:
    resolve_method(method, 0)   # still validate the argument
    return beta_map_nodes(g, x, m, dtype), "none"


def quadratic_map_nodes(g: GraphBuilder, x: str, m: QuadraticMap, dtype: np.dtype) -> str:
    """``((a * z) + (b * (z * z))) + c`` in ``predict``'s order, then scipy's expit; ``z`` the
    clamped score's ``Log(s) - Log(1 - s)`` or the margin itself."""
    z = _float64_score(g, x, m, dtype, "quad")
    if m.on == "logit":
        z = g.op("Sub", list(_clamped_logs(g, z, m.clamp, "quad")), "quad_z")
    az = g.op("Mul", [g.const(np.float64(m.a), "quad_a"), z], "quad_az")
    bzz = g.op("Mul", [g.const(np.float64(m.b), "quad_b"), g.op("Mul", [z, z], "quad_zz")],
               "quad_bzz")
    c = g.const(np.float64(m.c), "quad_c")
    eta = g.op("Add", [g.op("Add", [az, bzz], "quad_azbzz"), c], "quad_eta")
    # inf - inf (huge coefficients or margins): predict's fallback (z * (b * z + a)) + c
    alt = g.op("Add", [g.op("Mul", [z, g.op("Add", [g.op("Mul", [g.const(np.float64(m.b),
                                                                          "quad_b"), z],
                                                               "quad_bz"),
                                                   g.const(np.float64(m.a), "quad_a")],
                                            "quad_bza")], "quad_zbza"), c], "quad_eta_alt")
    eta = g.op("Where", [g.op("IsNaN", [eta], "quad_eta_nan"), alt, eta], "quad_eta_ok")
    return _floored_output(g, eta, x, m, dtype, "quad")


@map_subgraph.register
def _(m: QuadraticMap, g: GraphBuilder, x: str, dtype: np.dtype, method) -> tuple[str, str]:
    resolve_method(method, 0)   # still validate the argument
    return quadratic_map_nodes(g, x, m, dtype), "none"


def map_nodes(g: GraphBuilder, x: str, m, dtype: np.dtype, method="auto") -> tuple[str, str]:
    """Append the nodes evaluating map ``m`` on tensor ``x`` (1-D, graph dtype).

    Returns ``(output name, index search actually used or "none")``. Dispatches on the map's
    class through :func:`map_subgraph`.
    """
    return map_subgraph(m, g, x, dtype, method)


# -- OffsetMap: the re-offset stage after any binary map ----------------------------------------
def offset_stage_nodes(g: GraphBuilder, p: str, delta: float) -> str:
    """``expit((Log(p) - Log(1 - p)) + delta)`` on a float64 ``p``. No special case for ``p`` of
    exactly 0 or 1: ``Log`` gives ``-inf`` there, ``z`` is ``-inf`` or ``+inf`` and the expit
    returns exactly 0 or 1, as ``predict`` does; NaN stays NaN."""
    f64 = np.dtype(np.float64)
    log_p = g.op("Log", [p], "offset_log_p")
    log_q = g.op("Log", [g.op("Sub", [g.const(np.float64(1.0), "one"), p], "offset_1mp")],
                 "offset_log_1mp")
    z = g.op("Add", [g.op("Sub", [log_p, log_q], "offset_logit"),
                     g.const(np.float64(delta), "offset_delta")], "offset_z")
    return sigmoid_nodes(g, z, f64)


@map_subgraph.register
def _(m: OffsetMap, g: GraphBuilder, x: str, dtype: np.dtype, method) -> tuple[str, str]:
    # the inner map and the offset both run in float64 (a float32 graph casts its scores up,
    # exactly, and p' down): a float32 inner map's rounding would be amplified by up to
    # e^|delta| in the offset
    f64 = np.dtype(np.float64)
    if dtype != f64:
        x = g.op("Cast", [x], "offset_scores64", to=TensorProto.DOUBLE)
    p, used = map_subgraph(m.inner, g, x, f64, method)
    out = offset_stage_nodes(g, p, m.delta)
    if dtype != f64:
        out = g.op("Cast", [out], "offset_out", to=TensorProto.FLOAT)
    return out, used
