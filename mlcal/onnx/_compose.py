"""The base model's graph (via skl2onnx) with the calibration subgraph appended: one model."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from mlcal.onnx._graph import ONNX_FLOAT_TYPES, GraphBuilder
from mlcal.onnx._search import gather, round_up

# renamed so that the composed model's own outputs can use skl2onnx's public names
_BASE_PREFIX = "mlcal_base_"


def _final_estimator(est):
    while hasattr(est, "steps"):
        est = est.steps[-1][1]
    return est


def _converter_options(final, want: dict) -> dict:
    """The subset of ``want`` that skl2onnx's converter for ``final`` accepts."""
    from skl2onnx._supported_operators import sklearn_operator_name_map
    from skl2onnx.common._registration import get_converter

    alias = sklearn_operator_name_map.get(type(final))
    if alias is None:
        raise ValueError(f"skl2onnx has no converter for {type(final).__name__}; the base model "
                         "cannot be exported to ONNX")
    allowed = get_converter(alias).get_allowed_options() or {}
    return {k: v for k, v in want.items() if k in allowed}


def convert_base(estimator, score_source: str, dtype: np.dtype, opset: int):
    """skl2onnx conversion of the fitted base model; the score is its last output column.

    ``zipmap=False`` makes the probabilities a tensor; ``raw_scores=True`` makes the same output
    hold the decision function when the calibrator reads ``decision_function``.
    """
    from skl2onnx import to_onnx as skl_to_onnx
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    n_features = getattr(estimator, "n_features_in_", None)
    if n_features is None:
        raise ValueError("the base model has no n_features_in_; cannot declare the ONNX input")
    final = _final_estimator(estimator)
    want = {"zipmap": False}
    if score_source == "decision_function":
        want["raw_scores"] = True
        if "raw_scores" not in _converter_options(final, want):
            raise ValueError(f"skl2onnx cannot output the decision function of "
                             f"{type(final).__name__} (no raw_scores option)")
    options = {id(final): _converter_options(final, want)}
    tensor_type = FloatTensorType if dtype == np.float32 else DoubleTensorType
    try:
        base = skl_to_onnx(estimator, initial_types=[("X", tensor_type([None, int(n_features)]))],
                           options=options, target_opset=opset)
    except Exception as exc:  # skl2onnx raises many types; report them uniformly
        raise ValueError(f"skl2onnx could not convert the base model "
                         f"{type(estimator).__name__} in {dtype.name} at opset {opset}: "
                         f"{type(exc).__name__}: {exc}") from exc
    if len(base.graph.output) < 2:
        raise ValueError("the converted base model has no score output (expected label and "
                         "probabilities/scores)")
    return base


def _rename_everywhere(graph, old: str, new: str) -> None:
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for i, name in enumerate(node.output):
            if name == old:
                node.output[i] = new
    for vi in graph.output:
        if vi.name == old:
            vi.name = new


def score_column(g: GraphBuilder, scores_vi, dtype: np.dtype) -> str:
    """The last column of the base model's score output, as a 1-D tensor of the graph dtype.

    The column count is read at run time: skl2onnx's declared shape can be wrong (a pipeline
    ending in LinearSVC declares [N, 1] and returns [N, 2]). Flattening and taking every C-th
    element is ~6x faster in onnxruntime than a 2-D ``Slice`` of the last column.
    """
    i64 = lambda v: g.const(np.array([v], dtype=np.int64), "i")  # noqa: E731
    shape = g.op("Shape", [scores_vi.name], "scores_shape")
    n_cols = g.op("Slice", [shape, i64(1), i64(2)], "n_cols")
    last = g.op("Sub", [n_cols, i64(1)], "last_col")
    flat = g.op("Reshape", [scores_vi.name, i64(-1)], "scores_flat")
    col = g.op("Slice", [flat, last, i64(np.iinfo(np.int64).max), i64(0), n_cols], "score")
    if scores_vi.type.tensor_type.elem_type != ONNX_FLOAT_TYPES[dtype.name]:
        col = g.op("Cast", [col], "score_cast", to=ONNX_FLOAT_TYPES[dtype.name])
    return col


def classifier_outputs(g: GraphBuilder, p: str, classes: np.ndarray, threshold: float,
                       dtype: np.dtype) -> tuple[str, str, int]:
    """``label`` and the (n, 2) ``probabilities`` [1 - p, p], as ``CalibratedModel`` computes them.

    ``p >= threshold`` uses the threshold rounded up to the graph dtype (exact for that dtype).
    """
    classes = np.asarray(classes)
    if classes.dtype.kind in "iub":
        table, label_type = classes.astype(np.int64), TensorProto.INT64
    elif classes.dtype.kind in "UO" and all(isinstance(c, str) for c in classes.tolist()):
        table, label_type = np.array(classes.tolist(), dtype=object), TensorProto.STRING
    else:
        raise ValueError(f"classes_ of dtype {classes.dtype} cannot be ONNX labels; use integer "
                         "or string classes")
    thr = round_up(np.array([threshold], dtype=np.float64), dtype)[0]
    positive = g.op("GreaterOrEqual", [p, g.const(thr, "threshold")], "is_positive")
    idx = g.op("Cast", [positive], "label_idx", to=TensorProto.INT64)
    label = gather(g, g.const(table, "classes"), idx, "label")
    axes = g.const(np.array([1], dtype=np.int64), "axes")
    q = g.op("Sub", [g.const(dtype.type(1.0), "one"), p], "q")
    proba = g.op("Concat", [g.op("Unsqueeze", [q, axes], "q_col"),
                            g.op("Unsqueeze", [p, axes], "p_col")], "proba", axis=1)
    return label, proba, label_type


def compose(base, build_map, classes, threshold: float, dtype: np.dtype):
    """Append the calibration nodes to ``base``'s graph.

    ``build_map(g, scores_name) -> p_name`` adds the map subgraph. Returns ``(graph, extra
    opset imports of base)``.
    """
    graph = base.graph
    score_vi = graph.output[1]
    for vi in list(graph.output):
        _rename_everywhere(graph, vi.name, _BASE_PREFIX + vi.name)
    clash = [n for n in (*(i.name for i in graph.initializer), *(o for nd in graph.node
                                                                for o in nd.output))
             if n.startswith("mlcal_") and not n.startswith(_BASE_PREFIX)]
    if clash:
        raise ValueError(f"the base model graph already uses mlcal_ names: {clash[:3]}")
    g = GraphBuilder("mlcal_")
    scores = score_column(g, score_vi, dtype)
    p = build_map(g, scores)
    label, proba, label_type = classifier_outputs(g, p, classes, threshold, dtype)
    g.rename(label, "label")
    g.rename(proba, "probabilities")
    del graph.output[:]
    graph.output.extend([helper.make_tensor_value_info("label", label_type, [None]),
                         helper.make_tensor_value_info("probabilities",
                                                       ONNX_FLOAT_TYPES[dtype.name], [None, 2])])
    graph.node.extend(g.nodes)
    graph.initializer.extend(g.initializers)
    return graph
