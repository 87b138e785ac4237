"""A segmented map (:class:`mlcal.maps.segmented.SegmentedMap`) as ONNX nodes.

Inputs: the scores [N] and one [N] tensor per segment column (``string`` for a string column,
``int64`` for an integer one, ``bool`` for a boolean one), named as the columns.

Segment lookup, exact (no hashing, no floats): each column's value becomes its code among that
column's distinct key values (``ai.onnx.ml.LabelEncoder``, default ``-1``; a boolean is cast
to int64 first); codes are combined one column at a time, ``prefix * size_j + code_j`` (``-1``
as soon as one code is), and each combination is looked up among the key prefixes that exist,
so every intermediate stays below ``n_segments * size_j``; the last lookup gives the segment's
index, or ``-1`` for an unseen segment.

Then, in float64 whatever the graph dtype (as the offset map): ``q`` = the shared map,
``z = Gather(slopes, k) * (Log(q) - Log(1 - q)) + Gather(offsets, k)``, ``p = expit(z)``
(``q`` of 0 or 1 gives ``z = -+inf`` and ``p = q``), and ``Where(unseen, q, p)``: an unseen row
gets the shared map's output exactly. ONNX cannot raise, so under ``unseen="raise"`` an unseen
row's probability is NaN. A string tensor has no missing value: an empty string is the key
``""`` (unseen unless fitted).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from mlcal.onnx._graph import GraphBuilder
from mlcal.onnx._maps import map_subgraph, sigmoid_nodes
from mlcal.maps.segmented import SegmentedMap, lookup_plan

#: ai.onnx.ml opset of the LabelEncoder nodes
ML_OPSET = 2
#: ONNX element type of each segment column type
SEGMENT_INPUT_TYPES = {"string": TensorProto.STRING, "integer": TensorProto.INT64,
                       "boolean": TensorProto.BOOL}


def _encoder(g: GraphBuilder, x: str, keys: list, column_type: str, values: list,
             hint: str) -> str:
    """``values[keys.index(x)]``, or -1 when ``x`` is not a key (int64 out)."""
    if column_type == "string":
        return g.op("LabelEncoder", [x], hint, domain="ai.onnx.ml", keys_strings=list(keys),
                    values_int64s=[int(v) for v in values], default_int64=-1)
    if column_type == "boolean":
        x = g.op("Cast", [x], hint + "_int", to=TensorProto.INT64)
    return g.op("LabelEncoder", [x], hint, domain="ai.onnx.ml",
                keys_int64s=[int(k) for k in keys], values_int64s=[int(v) for v in values],
                default_int64=-1)


def segment_index_nodes(g: GraphBuilder, m: SegmentedMap, inputs: list[str]) -> str:
    """int64 [N]: each row's index into ``m.keys``, -1 for an unseen segment."""
    types = m.column_types
    if len(types) > 1:
        minus_one = g.const(np.int64(-1), "minus_one")
        zero = g.const(np.int64(0), "zero_i")
    index = ""
    for j, (x, t, step) in enumerate(zip(inputs, types, lookup_plan(m))):
        code = _encoder(g, x, step.uniques, t, step.codes, f"segment_code{j}")
        if j == 0:
            index = code
            continue
        missing = g.op("Or", [g.op("Less", [index, zero]), g.op("Less", [code, zero])],
                       f"segment_miss{j}")
        mixed = g.op("Add", [g.op("Mul", [index, g.const(np.int64(len(step.uniques)),
                                                          "radix")]),
                             code], f"segment_mixed{j}")
        mixed = g.op("Where", [missing, minus_one, mixed], f"segment_key{j}")
        index = _encoder(g, mixed, step.combined, "integer", step.target, f"segment_prefix{j}")
    return index


def segmented_nodes(g: GraphBuilder, x: str, inputs: list[str], m: SegmentedMap,
                    dtype: np.dtype, method) -> tuple[str, str]:
    """The map on scores ``x`` (graph dtype) and the segment inputs; returns ``(p, search)``."""
    f64 = np.dtype(np.float64)
    if dtype != f64:
        x = g.op("Cast", [x], "segmented_scores64", to=TensorProto.DOUBLE)
    q, used = map_subgraph(m.inner, g, x, f64, method)
    k = segment_index_nodes(g, m, inputs)
    unseen = g.op("Less", [k, g.const(np.int64(0), "zero_i")], "segment_unseen")
    safe = g.op("Where", [unseen, g.const(np.int64(0), "zero_i"), k], "segment_safe")
    slope = g.op("Gather", [g.const(np.asarray(m.slopes, np.float64), "slopes"), safe],
                 "segment_slope", axis=0)
    offset = g.op("Gather", [g.const(np.asarray(m.offsets, np.float64), "offsets"), safe],
                  "segment_offset", axis=0)
    log_q = g.op("Log", [q], "segmented_log_q")
    log_1mq = g.op("Log", [g.op("Sub", [g.const(np.float64(1.0), "one"), q])],
                   "segmented_log_1mq")
    z = g.op("Add", [g.op("Mul", [slope, g.op("Sub", [log_q, log_1mq], "segmented_logit")]),
                     offset], "segmented_z")
    p = sigmoid_nodes(g, z, f64)
    fallback = q if m.unseen == "shared" else g.const(np.float64(np.nan), "nan")
    out = g.op("Where", [unseen, fallback, p], "segmented_p")
    if dtype != f64:
        out = g.op("Cast", [out], "segmented_out", to=TensorProto.FLOAT)
    return out, used


def segmented_graph(m: SegmentedMap, dtype: np.dtype, method):
    """The standalone graph: inputs ``scores`` [N] and the segment columns [N], output
    ``p_calibrated`` [N]; returns ``(graph, index search used)``."""
    from onnx import helper

    from mlcal.onnx._graph import ONNX_FLOAT_TYPES

    g = GraphBuilder("mlcal_")
    p, used = segmented_nodes(g, "scores", m.column_names, m, dtype, method)
    g.rename(p, "p_calibrated")
    elem = ONNX_FLOAT_TYPES[dtype.name]
    inputs = [helper.make_tensor_value_info("scores", elem, [None])] + [
        helper.make_tensor_value_info(name, SEGMENT_INPUT_TYPES[t], [None])
        for name, t in m.columns]
    graph = helper.make_graph(g.nodes, "mlcal_segmented_calibrator", inputs,
                              [helper.make_tensor_value_info("p_calibrated", elem, [None])],
                              g.initializers)
    return graph, used


# -- error bound -----------------------------------------------------------------------------
def _amplification(a: float, d: float) -> float:
    """``sup_q |dp/dq|`` of ``p = expit(a logit(q) + d)``: ``a expit'(a L + d) / expit'(L)``
    over ``L = logit(q)``; ``e^|d|`` for ``a = 1``, unbounded for ``a < 1`` (q near 0 or 1),
    for ``a > 1`` the maximum over a grid of ``L`` with step ``h = 0.01`` (``|d/dL log f| <=
    a + 1``, so between grid points ``f`` exceeds the grid's maximum by at most
    ``e^(h (a + 1) / 2)``, the factor applied); it decays like ``e^-(a-1)|L|``."""
    if a == 1.0:
        return float(np.exp(abs(d)))
    if a < 1.0:
        return float("inf")
    L = np.linspace(-760.0, 760.0, 152_001)
    z = a * L + d

    def log_dsig(v):   # log expit'(v), stable
        return -np.abs(v) - 2.0 * np.log1p(np.exp(-np.abs(v)))
    return float(a * np.exp(np.max(log_dsig(z) - log_dsig(L)) + 0.005 * (a + 1.0)))


def _stage_error(a: float, d: float) -> float:
    """``|graph - predict|`` of ``expit(a (Log q - Log(1 - q)) + d)`` on the same float64
    ``q``: the offset map's derivation (``_bounds._offset_stage_error``) with the logit's
    error scaled by ``a`` (``a |L| <= |z| + |d|``) and one more rounding (the product)."""
    from mlcal.onnx._bounds import U64, _expit_error

    u = U64
    dz_part = 13 * u * 0.2241 + 0.25 * (11 * u * abs(d) + 13.1 * u * max(a, 1.0))
    return dz_part * 1.01 + _expit_error(np.float64)


def segmented_error_bound(m: SegmentedMap, dtype: np.dtype) -> float:
    """Bound on ``|graph - predict|`` over finite scores and seen or (``unseen="shared"``)
    unseen segments; 1.0 (no useful bound) when a slope is below 1 and the shared map's graph
    is not exact (sigmoid or beta shared maps: their absolute error is amplified without
    bound near 0 and 1)."""
    from mlcal.onnx._bounds import U64, map_error_bound

    inner = map_error_bound(m.inner, np.dtype(np.float64))
    err = inner
    for a, d in set(zip(m.slopes.tolist(), m.offsets.tolist())):
        amp = _amplification(a, d)
        err = max(err, (0.0 if inner == 0.0 else inner * amp * 1.01) + _stage_error(a, d))
    if dtype != np.float64:
        err += 2.0 ** -24   # the final Cast of p to float32
    return min(1.0, err * (1 + 4 * U64))


def _register_bound() -> None:
    from mlcal.onnx._bounds import map_error_bound

    map_error_bound.register(SegmentedMap)(segmented_error_bound)


_register_bound()


# -- fused with the base model ---------------------------------------------------------------
def segment_inputs(graph, g: GraphBuilder, m: SegmentedMap) -> list[str]:
    """One [N] tensor per segment column for the map's nodes: the base graph's own input of
    that name when it has one (a column the base model reads, [N, 1], reshaped; an integral
    float input is cast to int64), else a new graph input of that name, [N, 1], of the key
    type. Appends the new inputs to ``graph``."""
    from onnx import helper

    existing = {vi.name: vi for vi in graph.input}
    flat = g.const(np.array([-1], dtype=np.int64), "flat")
    out = []
    for name, t in m.columns:
        want = SEGMENT_INPUT_TYPES[t]
        if name not in existing:
            graph.input.append(helper.make_tensor_value_info(name, want, [None, 1]))
        x = g.op("Reshape", [name, flat], f"segment_{t}")
        have = existing[name].type.tensor_type.elem_type if name in existing else want
        if have != want:
            if t != "integer" or have not in (TensorProto.FLOAT, TensorProto.DOUBLE):
                raise ValueError(f"segment column {name!r} is a graph input of ONNX type "
                                 f"{TensorProto.DataType.Name(have)}; its keys are {t}s")
            x = g.op("Cast", [x], "segment_int", to=TensorProto.INT64)
        out.append(x)
    return out


def compose_segmented(base, m: SegmentedMap, classes, threshold: float, dtype: np.dtype,
                      method):
    """The base model's graph followed by the segmented map (its score column and the segment
    inputs); outputs ``label`` and ``probabilities`` as for any binary CalibratedModel.
    Returns ``(graph, index search used)``."""
    from mlcal.onnx._compose import _attach, _detach_outputs, classifier_outputs, score_column

    graph, score_vi = _detach_outputs(base)
    g = GraphBuilder("mlcal_")
    scores = score_column(g, score_vi, dtype)
    p, used = segmented_nodes(g, scores, segment_inputs(graph, g, m), m, dtype, method)
    label, proba, label_type = classifier_outputs(g, p, classes, threshold, dtype)
    _attach(graph, g, label, proba, label_type, dtype, 2)
    return graph, used
