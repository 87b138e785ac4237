"""ONNX builders and error bounds of the multiclass maps (input [N, K], output [N, K]).

* ``MulticlassMap`` (one-vs-rest): column ``k`` (``Gather`` on axis 1) goes through the binary
  builder of ``maps[k]``; the row sum is added column by column, left to right (the order of
  :func:`mlcal.maps.multiclass.row_sum`); each column is divided by it, and a row whose sum is 0
  gets ``1/K`` (``Where``). Same operations in the same order as ``predict_proba``, so in
  float64 a row is bit-identical wherever its class maps are (step maps, identity-transform
  linear maps).
* ``SoftmaxAffineMap``: ``x`` is the score row, or ``Log`` of it for log-probabilities, with
  Python's floor (a score ``<= probability_floor`` takes the constant ``log(floor)``); ``W x``
  is built as explicit ``Mul``/``Add`` over the columns ``j = 0 .. K-1`` (the kernel's loop
  order, no ``MatMul`` whose summation order is the runtime's), then ``* (1/T) + b``, the row
  maximum (``Max`` over the columns), ``Exp(z - max)``, the row sum left to right and the
  division. In float64 on logits, ``z`` and ``z - max`` are bit-identical to the kernel's, and
  only ``Exp`` differs (a few ulp). A ``uniform_weight`` ``eps`` adds ``p * (1 - eps) + eps /
  K`` (``Mul``, ``Add``; the constants computed in float64 as in Python). A float32 graph on
  logits is refused: rounding ``W x`` to float32 moves ``z`` by about ``|x| 2**-24``, which no
  bound over all logits can cover.

Non-finite scores: a row holding NaN or +-inf gives a NaN row (``predict_proba`` rejects it).
"""

from __future__ import annotations

import math

import numpy as np
from onnx import helper

from mlcal._solvers.detmath import det_log
from mlcal.maps.multiclass import MulticlassMap, SoftmaxAffineMap
from mlcal.onnx._bounds import EXP_ULPS, U64, _unit_roundoff, map_error_bound
from mlcal.onnx._graph import GraphBuilder
from mlcal.onnx._maps import map_subgraph
from mlcal.maps import LinearMap, SigmoidMap, StepMap

# |log x| over every positive float64 (log of the largest double) and the floored log
_MAX_ABS_LOG = 709.79


def _columns(g: GraphBuilder, x: str, k: int, hint: str) -> list[str]:
    """The K columns of an [N, K] tensor as [N, 1] tensors (one ``Split``)."""
    outs = [g.fresh(f"{hint}{j}") for j in range(k)]
    split = g.const(np.ones(k, dtype=np.int64), "split")
    g.nodes.append(helper.make_node("Split", [x, split], outs, axis=1,
                                    name=g.fresh("n_Split")))
    return outs


def _sum_left_to_right(g: GraphBuilder, cols: list[str], hint: str) -> str:
    total = cols[0]
    for c in cols[1:]:
        total = g.op("Add", [total, c], hint)
    return total


def _row_nan(g: GraphBuilder, raw: str, k: int, dtype: np.dtype) -> str:
    """[N, 1]: +-0 for a finite row, NaN for a row with a NaN or infinite score (x * 0 summed)."""
    zero = g.op("Mul", [raw, g.const(dtype.type(0), "zero")], "x_zero")
    return _sum_left_to_right(g, _columns(g, zero, k, "x_zero_col"), "row_nan")


@map_subgraph.register
def _(m: MulticlassMap, g: GraphBuilder, x: str, dtype: np.dtype, method) -> tuple[str, str]:
    k = m.n_classes
    axes = g.const(np.array([1], dtype=np.int64), "axes")
    cols, used = [], []
    for j, cm in enumerate(m.maps):
        xj = g.op("Gather", [x, g.const(np.int64(j), "col")], f"class{j}_score", axis=1)
        qj, u = map_subgraph(cm, g, xj, dtype, method)
        cols.append(g.op("Unsqueeze", [qj, axes], f"class{j}_p"))
        used.append(u)
    q = g.op("Concat", cols, "q", axis=1)
    total = _sum_left_to_right(g, cols, "row_sum")
    ratio = g.op("Div", [q, total], "normalised")
    positive = g.op("Greater", [total, g.const(dtype.type(0), "zero")], "row_positive")
    out = g.op("Where", [positive, ratio, g.const(dtype.type(1.0 / k), "uniform")], "p_ovr")
    # a NaN class probability makes the sum NaN, which the Where above sends to 1/K: put it back
    out = g.op("Add", [out, g.op("Sub", [total, total], "sum_nan")], "p_ovr_nan")
    searches = sorted({str(u) for u in used if u != "none"})
    return out, ",".join(searches) or "none"


@map_subgraph.register
def _(m: SoftmaxAffineMap, g: GraphBuilder, x: str, dtype: np.dtype, method) -> tuple[str, str]:
    if dtype != np.float64 and m.input == "logits":
        raise ValueError("a softmax-affine map on logits exports in float64 only: float32 "
                         "arithmetic on logits of magnitude L moves the softmax input by about "
                         "L * 2**-24, which no error bound over all logits covers")
    k = m.n_classes
    raw = x
    if m.input == "log-probabilities":
        # Python floors at the map's probability_floor before its log. In float32 the floor
        # rounds (to 0 below the float32 range, where every positive float32 is above it); an
        # input between the two floors then takes log(x) instead of log(floor), which differ
        # by less than the input's own rounding (inside the error bound below)
        floor = m.probability_floor
        above = g.op("Greater", [x, g.const(dtype.type(floor), "floor")], "above_floor")
        x = g.op("Where", [above, g.op("Log", [x], "log_p"),
                           g.const(dtype.type(det_log(floor)), "log_floor")], "x")
    x_cols = _columns(g, x, k, "x_col")
    W = m.full_weights()
    if m.weights.ndim == 1:
        # the kernel's sum over j adds exact zeros besides W[k, k] x[k]: the same value
        acc = g.op("Mul", [x, g.const(m.weights.astype(dtype).reshape(1, k), "w")], "wx")
    else:
        acc = None
        for j, xj in enumerate(x_cols):
            term = g.op("Mul", [xj, g.const(W[:, j].astype(dtype).reshape(1, k), "w_col")],
                        "wx_term")
            acc = term if acc is None else g.op("Add", [acc, term], "wx")
    inv_t = 1.0 / m.temperature
    z = g.op("Add", [g.op("Mul", [acc, g.const(dtype.type(inv_t), "inv_t")], "wx_t"),
                     g.const(m.bias.astype(dtype).reshape(1, k), "bias")], "z")
    top = g.op("Max", _columns(g, z, k, "z_col"), "z_max")
    e = g.op("Exp", [g.op("Sub", [z, top], "z_shift")], "exp_z")
    total = _sum_left_to_right(g, _columns(g, e, k, "e_col"), "exp_sum")
    p = g.op("Div", [e, total], "softmax")
    if m.uniform_weight != 0.0:
        # Python's p * (1 - eps) + eps / K, the constants computed in float64 as there
        p = g.op("Add", [g.op("Mul", [p, g.const(dtype.type(1.0 - m.uniform_weight), "keep")],
                              "p_kept"),
                         g.const(dtype.type(m.uniform_weight / k), "uniform_part")], "p_mixed")
    return g.op("Add", [p, _row_nan(g, raw, k, dtype)], "p_softmax"), "none"


# ------------------------------------------------------------------------------------------------
# error bounds
def _gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n u / (1 - n u): relative error of n rounded operations."""
    return n * u / (1.0 - n * u)


def _exp_rel(dtype: np.dtype) -> float:
    """Allowed relative discrepancy between the runtime's exp/log and detmath's."""
    u = _unit_roundoff(dtype)
    return EXP_ULPS * 2 * u + (0.0 if u == U64 else (EXP_ULPS * 2) * U64)


@map_error_bound.register
def _(m: SoftmaxAffineMap, dtype: np.dtype) -> float:
    """Derivation (``u`` the graph's unit roundoff, ``E`` the exp/log discrepancy):

    * ``z``: identical in float64 on logits (``delta = 0``). With log-probabilities
      ``|x| <= 709.79`` and the two logs differ by ``E |x|``; with both sides rounding a dot
      product of K terms and two more operations, ``|dz_k| <= sum_j |W_kj| E xmax / T +
      2 gamma_(K+2) (sum_j |W_kj| xmax / T + |b_k|) = delta_k``.
    * ``e_k = exp(z_k - max)``: relative error ``A = expm1(2 delta)(1 + E) + E``, plus the
      rounding of ``z_k - max`` when the two sides differ: ``2u |z_k - max|``, and
      ``p_k |z_k - max| <= p_k log(1/p_k) <= 1/e``, so it adds ``B = 2u/e e^(2 delta)`` to
      ``p_k``'s error (``K B`` to the sum's).
    * the sum: ``rho_S <= A + K B + 2 gamma_(K-1)``; the division: ``2u``.
      ``|dp_k| <= (A + B + rho_S) / (1 - rho_S) + 2u``.
    """
    u = _unit_roundoff(dtype)
    E = _exp_rel(dtype)
    k = m.n_classes
    if m.input == "logits":
        if dtype != np.float64:
            return 1.0   # no export exists (see the builder); the trivial bound
        delta, b_term = 0.0, 0.0
    else:
        W = np.abs(m.full_weights()) / m.temperature
        row = W.sum(axis=1)
        delta = float(np.max(row * E * _MAX_ABS_LOG
                             + 2 * _gamma(k + 2, u) * (row * _MAX_ABS_LOG + np.abs(m.bias))))
        b_term = 2 * u / math.e * math.exp(2 * delta) * 1.01
    A = math.expm1(2 * delta) * (1 + E) + E
    rho_s = A + k * b_term + 2 * _gamma(max(k - 1, 1), u)
    if rho_s >= 0.5:
        return 1.0
    bound = ((A + b_term + rho_s) / (1 - rho_s) + 2 * u) * 1.01
    if m.uniform_weight != 0.0:
        # (1 - eps) shrinks the softmax's error; the two constants round by u relative (p <= 1,
        # eps/K <= 1) and the Mul and the Add by u each
        bound = (1.0 - m.uniform_weight) * bound + 4 * u * 1.01
    return min(1.0, bound)


def _relative_bound(m, dtype: np.dtype) -> float | None:
    """A bound on ``|graph(x) - m(x)| / m(x)`` for a binary class map, or None if only an
    absolute bound is known (zeros then stay exact zeros)."""
    u = _unit_roundoff(dtype)
    if map_error_bound(m, dtype) == 0.0:
        return 0.0
    if isinstance(m, StepMap) and dtype == np.float32:
        v = m.values[m.values != 0]
        # a float32 graph returns float32(value): relative error <= u for normal numbers
        return u if v.size == 0 or np.abs(v).min() >= np.finfo(np.float32).tiny else None
    if isinstance(m, SigmoidMap) and dtype == np.float64:
        # q = 1/(1 + exp(z)): dq/q = -(1 - q) dz, so an error in z is relative in q
        E = _exp_rel(dtype)
        a, b = abs(m.a), abs(m.b)
        dz = 0.0
        if m.input_transform == "sigmoid":
            dz = a * (E / 4 + 4 * u) * (1 + 4 * u) + 4 * u * (a + b)
        return (dz + E + 4 * u) * 1.01
    return None


def _lowest_value(m) -> float:
    """The smallest probability the binary map can return."""
    if isinstance(m, (StepMap, LinearMap)):
        return float(np.min(m.values))
    return 0.0


@map_error_bound.register
def _(m: MulticlassMap, dtype: np.dtype) -> float:
    """Derivation: the normalisation repeats Python's operations (sum left to right, divide),
    so with class probabilities ``q'_k`` within relative error ``R`` of ``q_k`` (0 where the
    class map is exact in float64), ``|p'_k - p_k| <= (2 R + 2 gamma_(K-1)) / (1 - R -
    gamma_(K-1)) + 2u`` (0 when every class map is bit-identical in float64; zeros stay zeros,
    so the all-zero rule picks the same rows, except where a sigmoid class map's ``exp``
    overflows in one runtime only, i.e. class probabilities near 1e-308). When some class map has only an absolute bound
    ``b_k`` (float32 linear maps, linear maps on a sigmoid transform), the row sum ``S`` is at
    least ``L = sum of the maps' lowest values`` and ``|dp_k| <= 2 sum b / (L - sum b)``; with
    ``L <= sum b`` (maps that can all return ~0) no useful bound exists and 1.0 is returned:
    a row whose class probabilities are all near 0 amplifies their absolute errors."""
    u = _unit_roundoff(dtype)
    k = m.n_classes
    rel = [_relative_bound(cm, dtype) for cm in m.maps]
    g = _gamma(max(k - 1, 1), u)
    if all(r is not None for r in rel):
        R = max(rel)
        if R == 0.0 and dtype == np.float64:
            return 0.0
        return min(1.0, ((2 * R + 2 * g) / (1 - R - g) + 2 * u) * 1.01)
    b = sum(map_error_bound(cm, dtype) if r is None else r for cm, r in zip(m.maps, rel))
    low = sum(_lowest_value(cm) for cm in m.maps)
    if low <= 2 * b:
        return 1.0
    return min(1.0, (2 * b / (low - b) + 2 * g + 2 * u) * 1.01)
