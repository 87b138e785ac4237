"""The base model's graph (via skl2onnx) with the calibration subgraph appended: one model."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from mlcal._optional import require
from mlcal.onnx._graph import ONNX_FLOAT_TYPES, GraphBuilder
from mlcal.onnx._search import gather, round_up

# renamed so that the composed model's own outputs can use skl2onnx's public names
_BASE_PREFIX = "mlcal_base_"


class MissingConverterError(ValueError):
    """No ONNX converter is available for the base model (names the package to install)."""


# ai.onnx.ml version requested from the tree converters (TreeEnsembleClassifier v3 takes
# double thresholds as tensors; ORT 1.18+ runs it)
ML_OPSET = 3
_BOOSTER_CONVERTERS = {
    # library: (estimator class path, skl2onnx alias, onnxmltools converter path)
    "xgboost": ("xgboost.XGBClassifier", "XGBoostXGBClassifier",
                "onnxmltools.convert.xgboost.operator_converters.XGBoost.convert_xgboost"),
    "lightgbm": ("lightgbm.LGBMClassifier", "LightGbmLGBMClassifier",
                 "onnxmltools.convert.lightgbm.operator_converters.LightGbm.convert_lightgbm"),
}


def _import_path(path: str):
    import importlib

    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def register_booster_converter(library: str) -> None:
    """Register onnxmltools' converter for ``library``'s classifier with skl2onnx (idempotent),
    so pipelines ending in an XGBoost/LightGBM classifier convert in one call."""
    from skl2onnx import update_registered_converter
    from skl2onnx.common.shape_calculator import calculate_linear_classifier_output_shapes

    cls_path, alias, conv_path = _BOOSTER_CONVERTERS[library]
    try:
        convert = _import_path(conv_path)
    except ImportError:
        raise MissingConverterError(
            f"exporting a {library} model to ONNX needs the onnxmltools package (its "
            f"{library} converter); it comes with `pip install 'mlcal[onnx]'` (or `pip "
            "install onnxmltools`)") from None
    update_registered_converter(_import_path(cls_path), alias,
                                calculate_linear_classifier_output_shapes, convert,
                                options={"nocl": [True, False],
                                         "zipmap": [True, False, "columns"]})


def _converter_options(final, want: dict) -> dict:
    """The subset of ``want`` that skl2onnx's converter for ``final`` accepts."""
    from skl2onnx._supported_operators import sklearn_operator_name_map
    from skl2onnx.common._registration import get_converter

    alias = sklearn_operator_name_map.get(type(final))
    if alias is None:
        raise MissingConverterError(f"skl2onnx has no converter for {type(final).__name__}; "
                                    "the base model cannot be exported to ONNX")
    allowed = get_converter(alias).get_allowed_options() or {}
    return {k: v for k, v in want.items() if k in allowed}


def frame_input_types(frame, float_type) -> list:
    """One skl2onnx input per DataFrame column, shape [N, 1]: floats as ``float_type``,
    integers as int64, booleans as bool, everything else as strings."""
    from pandas.api import types as pdt
    from skl2onnx.common.data_types import (BooleanTensorType, Int64TensorType,
                                            StringTensorType)

    types = []
    for name, dtype in frame.dtypes.items():
        if pdt.is_bool_dtype(dtype):
            t = BooleanTensorType
        elif pdt.is_float_dtype(dtype):
            t = float_type
        elif pdt.is_integer_dtype(dtype):
            t = Int64TensorType
        else:  # strings, categories, objects
            t = StringTensorType
        types.append((str(name), t([None, 1])))
    return types


def _set_tree_post_transform_none(base) -> None:
    """Make the tree ensemble output raw margins instead of LOGISTIC (binary) or SOFTMAX
    (multiclass) probabilities."""
    found = False
    for node in base.graph.node:
        if node.op_type == "TreeEnsembleClassifier":
            for attr in node.attribute:
                if attr.name == "post_transform" and attr.s in (b"LOGISTIC", b"SOFTMAX"):
                    attr.s = b"NONE"
                    found = True
    if not found:
        raise ValueError("the converted booster has no LOGISTIC or SOFTMAX tree ensemble; "
                         "cannot export its margin")


def _trees_read_float32(base) -> None:
    """Cast the tree ensemble's input to float32 and declare its outputs float.

    XGBoost and LightGBM compare float32(x) with float32 thresholds; a double graph keeps the
    preprocessing in float64 (as scikit-learn computes it) and rounds right before the trees,
    which is exactly what the libraries do. onnxmltools declares the ensemble's outputs in the
    input type, but the operator always returns float scores, so the declarations are fixed.
    """
    ensembles = [n for n in base.graph.node if n.op_type == "TreeEnsembleClassifier"]
    for k, node in enumerate(ensembles):
        cast_out = f"{_BASE_PREFIX}trees_in_{k}"
        cast = helper.make_node("Cast", [node.input[0]], [cast_out], to=TensorProto.FLOAT,
                                name=f"{_BASE_PREFIX}trees_cast_{k}")
        node.input[0] = cast_out
        base.graph.node.insert(list(base.graph.node).index(node), cast)
    for vi in base.graph.output:
        if vi.type.tensor_type.elem_type == TensorProto.DOUBLE:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    del base.graph.value_info[:]  # stale declarations; onnx re-infers what it needs


def convert_base(estimator, score_source: str, dtype: np.dtype, opset: int, X=None):
    """skl2onnx conversion of the fitted base model; the score is its last output column.

    ``zipmap=False`` makes the probabilities a tensor; ``raw_scores=True`` makes the same output
    hold the decision function when the calibrator reads ``decision_function``. XGBoost and
    LightGBM classifiers go through onnxmltools' converters (registered here, with the
    ai.onnx.ml opset they need); their trees compare in float32, so the graph rounds right
    before the trees, and a margin export switches the ensemble's LOGISTIC post-transform
    off. With a DataFrame ``X`` the model gets one graph input per column (named, typed by
    the column).
    """
    require("onnx", "skl2onnx", feature="exporting a base model to ONNX")
    from skl2onnx import to_onnx as skl_to_onnx
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    from mlcal.base_models.scores import final_estimator, library_of

    final = final_estimator(estimator)
    library = library_of(estimator)
    if library == "catboost":
        raise MissingConverterError(
            "mlcal has no ONNX converter for CatBoost models (skl2onnx and onnxmltools do "
            "not convert CatBoostClassifier); export XGBoost, LightGBM or scikit-learn bases")
    if type(final).__module__.startswith("mlcal."):
        raise MissingConverterError(
            f"no ONNX converter for {type(final).__name__}; export the XGBoost/LightGBM "
            "scikit-learn classifier (XGBClassifier / LGBMClassifier) instead of a Booster")
    booster = library in _BOOSTER_CONVERTERS
    if booster:
        register_booster_converter(library)
    want = {"zipmap": False}
    if score_source in ("decision_function", "margin") and not booster:
        want["raw_scores"] = True
        if "raw_scores" not in _converter_options(final, want):
            raise ValueError(f"skl2onnx cannot output the decision function of "
                             f"{type(final).__name__} (no raw_scores option)")
    options = {id(final): _converter_options(final, want)}
    tensor_type = FloatTensorType if dtype == np.float32 else DoubleTensorType
    if X is not None:
        import pandas as pd

        if not isinstance(X, pd.DataFrame):
            raise ValueError("X must be a pandas DataFrame (a few rows with the model's input "
                             f"columns), got {type(X).__name__}")
        initial_types = frame_input_types(X, tensor_type)
    else:
        n_features = getattr(estimator, "n_features_in_", None)
        if n_features is None:
            raise ValueError("the base model has no n_features_in_; cannot declare the ONNX "
                             "input (pass X=<a few input rows as a DataFrame>)")
        initial_types = [("X", tensor_type([None, int(n_features)]))]
    target = {"": opset, "ai.onnx.ml": ML_OPSET} if booster else opset
    try:
        base = skl_to_onnx(estimator, initial_types=initial_types, options=options,
                           target_opset=target)
    except Exception as exc:  # skl2onnx raises many types; report them uniformly
        hint = ""
        if X is None and hasattr(estimator, "feature_names_in_"):
            hint = (" (the model was fitted on named columns: pass X=<a few rows of its input "
                    "DataFrame> to export one graph input per column)")
        raise ValueError(f"skl2onnx could not convert the base model "
                         f"{type(estimator).__name__} in {dtype.name} at opset {opset}: "
                         f"{type(exc).__name__}: {exc}{hint}") from exc
    if len(base.graph.output) < 2:
        raise ValueError("the converted base model has no score output (expected label and "
                         "probabilities/scores)")
    if booster:
        if score_source == "margin":
            _set_tree_post_transform_none(base)
        _trees_read_float32(base)
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
    table, label_type = label_table(classes)
    thr = round_up(np.array([threshold], dtype=np.float64), dtype)[0]
    positive = g.op("GreaterOrEqual", [p, g.const(thr, "threshold")], "is_positive")
    idx = g.op("Cast", [positive], "label_idx", to=TensorProto.INT64)
    label = gather(g, g.const(table, "classes"), idx, "label")
    axes = g.const(np.array([1], dtype=np.int64), "axes")
    q = g.op("Sub", [g.const(dtype.type(1.0), "one"), p], "q")
    proba = g.op("Concat", [g.op("Unsqueeze", [q, axes], "q_col"),
                            g.op("Unsqueeze", [p, axes], "p_col")], "proba", axis=1)
    return label, proba, label_type


def _detach_outputs(base):
    """Rename the base graph's outputs out of the way; returns ``(graph, score output info)``."""
    graph = base.graph
    score_vi = graph.output[1]
    for vi in list(graph.output):
        _rename_everywhere(graph, vi.name, _BASE_PREFIX + vi.name)
    clash = [n for n in (*(i.name for i in graph.initializer), *(o for nd in graph.node
                                                                for o in nd.output))
             if n.startswith("mlcal_") and not n.startswith(_BASE_PREFIX)]
    if clash:
        raise ValueError(f"the base model graph already uses mlcal_ names: {clash[:3]}")
    return graph, score_vi


def _attach(graph, g: GraphBuilder, label: str, proba: str, label_type: int,
            dtype: np.dtype, n_cols: int) -> None:
    """Make ``label`` and ``proba`` the graph's outputs and add the builder's nodes."""
    g.rename(label, "label")
    g.rename(proba, "probabilities")
    del graph.output[:]
    graph.output.extend([helper.make_tensor_value_info("label", label_type, [None]),
                         helper.make_tensor_value_info("probabilities",
                                                       ONNX_FLOAT_TYPES[dtype.name],
                                                       [None, n_cols])])
    graph.node.extend(g.nodes)
    graph.initializer.extend(g.initializers)


def label_table(classes) -> tuple[np.ndarray, int]:
    """The classes as an ONNX label table: ``(int64 or string array, element type)``."""
    classes = np.asarray(classes)
    if classes.dtype.kind in "iub":
        return classes.astype(np.int64), TensorProto.INT64
    if classes.dtype.kind in "UO" and all(isinstance(c, str) for c in classes.tolist()):
        return np.array(classes.tolist(), dtype=object), TensorProto.STRING
    raise ValueError(f"classes_ of dtype {classes.dtype} cannot be ONNX labels; use integer "
                     "or string classes")


def compose(base, build_map, classes, threshold: float, dtype: np.dtype):
    """Append the calibration nodes to ``base``'s graph.

    ``build_map(g, scores_name) -> p_name`` adds the map subgraph. Returns the graph.
    """
    graph, score_vi = _detach_outputs(base)
    g = GraphBuilder("mlcal_")
    scores = score_column(g, score_vi, dtype)
    p = build_map(g, scores)
    label, proba, label_type = classifier_outputs(g, p, classes, threshold, dtype)
    _attach(graph, g, label, proba, label_type, dtype, 2)
    return graph


def compose_multiclass(base, build_map, classes, dtype: np.dtype):
    """Append a multiclass map to ``base``'s graph: its whole [N, K] score output feeds the
    map; outputs ``label`` (``classes_[argmax]``, first maximum as ``np.argmax``) and
    ``probabilities`` [N, K]."""
    graph, score_vi = _detach_outputs(base)
    g = GraphBuilder("mlcal_")
    scores = score_vi.name
    if score_vi.type.tensor_type.elem_type != ONNX_FLOAT_TYPES[dtype.name]:
        scores = g.op("Cast", [scores], "scores_cast", to=ONNX_FLOAT_TYPES[dtype.name])
    proba = build_map(g, scores)
    table, label_type = label_table(classes)
    idx = g.op("ArgMax", [proba], "label_idx", axis=1, keepdims=0)
    label = g.op("Gather", [g.const(table, "classes"), idx], "label", axis=0)
    _attach(graph, g, label, proba, label_type, dtype, len(table))
    return graph
