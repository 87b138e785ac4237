"""ONNX export of mlcal calibrators and calibrated models, with standard operators only.

Every calibrator ends in one canonical map, so one exporter covers every method.

Examples
--------
>>> import numpy as np, mlcal
>>> from mlcal.onnx import to_onnx
>>> cal = mlcal.Isotonic().fit(np.linspace(0, 1, 50), np.arange(50) % 3 == 0)
>>> model = to_onnx(cal)                      # input "scores" [N], output "p_calibrated" [N]
>>> [i.name for i in model.graph.input], [o.name for o in model.graph.output]
(['scores'], ['p_calibrated'])

Graph contract
--------------
* Calibrator (or bare map): input ``scores``, a 1-D float tensor of shape [N] (reshape an
  [N, 1] column first); output ``p_calibrated`` of shape [N], same dtype.
* :class:`~mlcal.CalibratedModel`: input ``X`` [N, n_features]; outputs ``label`` [N] (int64 or
  string, ``classes_[1]`` where ``p >= threshold``) and ``probabilities`` [N, 2] =
  ``[1 - p, p]``, like skl2onnx classifiers with ``zipmap=False``. The base model is converted by
  skl2onnx; its probability column (or its decision function, followed by the sigmoid when the
  map's input transform says so) feeds the map.
* Multiclass calibrator (``OneVsRest``, temperature/vector/matrix scaling) or map: input
  ``scores`` [N, K], output ``p_calibrated`` [N, K]; a multiclass CalibratedModel outputs
  ``label`` [N] (``classes_[argmax]``) and ``probabilities`` [N, K]. A row holding a NaN or
  infinite score gives a NaN row. Builders and bounds: ``mlcal/onnx/_multiclass.py``.
* Multicalibrated :class:`~mlcal.CalibratedModel` (a
  :class:`~mlcal.multicalibration.Multicalibration` with ``feature_columns``): float64 only;
  the base model's inputs plus one [N, 1] input per feature column (double or string; the
  base's own input of that name where it reads the column); outputs ``label``,
  ``probabilities`` [N, 2] and ``tree_leaves`` [N, T]. Built by
  ``mlcal/multicalibration/onnx_export.py`` (``compose_multicalibration``).
* NaN scores give NaN probabilities (label ``classes_[0]``), never a silent end value, and so
  do infinite scores; Python's ``predict`` keeps rejecting both with ``ValueError``.
* Exactness (see :func:`error_bound`): in float64, step maps and linear maps are bit-identical
  to ``predict``; anything evaluating ``exp`` (SigmoidMap, the sigmoid input transform of a
  linear map) is within a few ulp, because no two ``exp`` implementations agree bit for bit. In
  float32, step maps equal ``predict(x).astype(float32)`` exactly and linear maps stay within a
  derived bound (~1e-7 for fitted isotonic maps, where a naive float32 graph is off by ~1e-5).
  BetaMap evaluates ``Log`` as well (computed in float64 even in a float32 graph): ~3e-14 of
  ``predict`` in float64 on probability scores (docs/beta.md, 'ONNX').
* Operators: ai.onnx only (opset 13 or later; ``Where``, ``IsNaN``, ``Floor``, ``Clip``,
  ``Cast``, ``GatherElements``, ``LessOrEqual``, arithmetic, ``Exp``, ``Log``); the composed
  model also holds whatever skl2onnx emits for the base model (often ai.onnx.ml).
* Opset: ``opset`` is checked against the installed onnx (13 to its newest); onnxruntime 1.31
  loads up to 26.
* Metadata (``model.metadata_props``): ``mlcal_version``, ``mlcal_method``, ``mlcal_map_type``,
  ``mlcal_map_format_version``, ``mlcal_input_transform``, ``mlcal_dtype``,
  ``mlcal_index_search`` and, for a CalibratedModel, ``mlcal_score_source``,
  ``mlcal_threshold``, ``mlcal_base_model``.
"""

from __future__ import annotations

from mlcal._optional import require

require("onnx", "onnx")

import json  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import pandas as pd  # noqa: E402
from onnx import helper  # noqa: E402

from mlcal.onnx._bounds import error_bound
from mlcal.onnx._compose import (MissingConverterError, compose, compose_multiclass,
                                 convert_base)
from mlcal.onnx._graph import ONNX_FLOAT_TYPES, GraphBuilder
from mlcal.onnx._maps import map_nodes
from mlcal.onnx import _multiclass  # noqa: F401  (registers the multiclass builders and bounds)
from mlcal.onnx._search import SEARCH_METHODS
from mlcal.onnx._segmented import (ML_OPSET as SEGMENTED_ML_OPSET, compose_segmented,
                                   segmented_graph)

DEFAULT_OPSET = 17
MIN_OPSET = 13   # Clip/Unsqueeze/ReduceSum/Squeeze take their bounds and axes as inputs from 13
DTYPES = ("float32", "float64")

__all__ = ["DEFAULT_OPSET", "DTYPES", "MIN_OPSET", "SEARCH_METHODS", "MissingConverterError",
           "error_bound", "input_feeds", "save", "to_onnx"]


def _check_args(dtype, opset, index_search) -> np.dtype:
    if str(dtype) not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    max_opset = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)) \
            or not MIN_OPSET <= opset <= max_opset:
        raise ValueError(f"opset must be an integer in [{MIN_OPSET}, {max_opset}] (the installed "
                         f"onnx's newest), got {opset!r}")
    if index_search not in SEARCH_METHODS:
        raise ValueError(f"index_search must be one of {SEARCH_METHODS}, got {index_search!r}")
    return np.dtype(str(dtype))


def _unpack(obj):
    """``(map, method name, CalibratedModel or None)`` for any exportable object."""
    from mlcal.calibrators.base import BaseCalibrator
    from mlcal.calibrators.multiclass import MulticlassCalibrator
    from mlcal.maps import CalibrationMap
    from mlcal.model import CalibratedModel

    if isinstance(obj, CalibratedModel):
        obj._check_fitted()
        return obj.calibrator_.map_, _method_of(obj.calibrator_), obj
    if isinstance(obj, BaseCalibrator):
        obj._check_fitted()
        return obj.map_, obj.method_name, None
    if isinstance(obj, MulticlassCalibrator):
        if not hasattr(obj, "map_"):
            raise ValueError(f"cannot export an unfitted {type(obj).__name__}; fit it first")
        return obj.map_, obj.document_method, None
    if isinstance(obj, CalibrationMap):   # whether its type has an ONNX builder: map_subgraph
        return obj, "", None
    from mlcal.calibrators.segmented import SegmentedCalibrator
    from mlcal.maps.segmented import SegmentedMap

    if isinstance(obj, SegmentedCalibrator):
        obj._check_fitted()
        return obj.map_, obj.method_name, None
    if isinstance(obj, SegmentedMap):
        return obj, "", None
    raise ValueError(f"cannot export {type(obj).__name__}: expected a fitted mlcal calibrator, a "
                     "CalibratedModel or a calibration map (StepMap, LinearMap, SigmoidMap, ...)")


def _method_of(cal) -> str:
    return getattr(cal, "method_name", None) or getattr(cal, "document_method", "")


def n_classes_of(m) -> int | None:
    """K for a multiclass map (graph tensors [N, K]), None for a binary map ([N])."""
    return getattr(m, "n_classes", None)


def _metadata(model, items: dict) -> None:
    for key, value in items.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, str(value)


def to_onnx(obj, *, dtype: str = "float64", opset: int = DEFAULT_OPSET,
            index_search: str = "auto", X=None) -> onnx.ModelProto:
    """Export a fitted calibrator, a bare map or a :class:`~mlcal.CalibratedModel` to ONNX.

    Parameters
    ----------
    obj : BaseCalibrator, MulticlassCalibrator, a map or CalibratedModel
        (maps: StepMap, LinearMap, SigmoidMap, BetaMap, MulticlassMap, SoftmaxAffineMap)
        A calibrator gives a graph from scores to calibrated probabilities (multiclass:
        [N, K] to [N, K]; float32 is refused for a softmax-affine map on logits); a CalibratedModel
        gives the whole classifier (its base model must be convertible by skl2onnx in
        ``dtype``; XGBoost and LightGBM classifiers, alone or ending a pipeline, go through
        onnxmltools' converters, registered here with the ai.onnx.ml opset they need).
    dtype : {"float64", "float32"}, default="float64"
        Input and compute dtype. float64 reproduces ``predict`` exactly (see the module notes);
        float32 suits runtimes without double kernels.
    opset : int, default=17
        ai.onnx opset version, from 13 up to the installed onnx's newest. For a CalibratedModel
        it is also skl2onnx's target opset.
    index_search : {"auto", "lut", "bsearch", "broadcast"}, default="auto"
        How step/linear maps find a score's bin (see ``mlcal/onnx/_search.py``; ``"auto"`` is
        the design measured fastest in ``benchmarks/bench_onnx.py``).
    X : pandas.DataFrame, optional
        For a CalibratedModel whose base reads named (possibly mixed-type) columns, e.g. a
        ColumnTransformer pipeline: a few input rows. The graph then has one input per column,
        named as the column, shape [N, 1], typed from its dtype (floats in ``dtype``, integers
        int64, booleans bool, others string); build the feeds with :func:`input_feeds`.
        Without it the graph has one tensor input ``X`` [N, n_features].

    Returns
    -------
    onnx.ModelProto
        Checked with ``onnx.checker.check_model(full_check=True)``; save it with :func:`save`.

    Raises
    ------
    ValueError
        Unfitted object, bad argument, or a base model skl2onnx cannot convert.
    MissingConverterError
        No converter for the base model; the message names the package to install
        (onnxmltools for XGBoost/LightGBM) or says none exists (CatBoost).
    """
    from mlcal import __version__
    from mlcal.maps import MAP_FORMAT_VERSION
    # a multicalibration map reads the score and segment features: its own exporter. Looked up
    # among loaded modules (an object of it implies the module is loaded), so exporting a
    # score-only map never imports it
    multical = sys.modules.get("mlcal.multicalibration")
    if multical is not None and isinstance(obj, (multical.Multicalibration,
                                                 multical.MulticalibrationMap)):
        from mlcal.multicalibration.onnx_export import to_onnx as multicalibration_to_onnx

        if dtype != "float64" or X is not None:
            raise ValueError("a multicalibration map exports as a float64 graph of the score "
                             "and its segment features (no dtype or X options)")
        if isinstance(obj, multical.Multicalibration):
            obj._check_fitted()
        return multicalibration_to_onnx(obj, opset=opset)
    if multical is not None and isinstance(getattr(obj, "calibrator_", None),
                                           multical.Multicalibration):
        return _multicalibrated_model(obj, dtype, opset, index_search, X)
    np_dtype = _check_args(dtype, opset, index_search)
    m, method, calibrated = _unpack(obj)
    used = {}

    def build_map(g, scores):
        p, used["search"] = map_nodes(g, scores, m, np_dtype, index_search)
        return p

    elem = ONNX_FLOAT_TYPES[np_dtype.name]
    meta = {"mlcal_version": __version__, "mlcal_method": method, "mlcal_map_type": m.kind,
            "mlcal_map_format_version": MAP_FORMAT_VERSION,
            "mlcal_input_transform": m.input_transform, "mlcal_dtype": np_dtype.name}
    if X is not None and calibrated is None:
        raise ValueError("X only applies to a CalibratedModel export")
    k = n_classes_of(m)
    if k is not None:
        meta["mlcal_n_classes"] = k
    segmented = getattr(m, "kind", None) == "segmented"
    if segmented:
        meta["mlcal_segment_columns"] = json.dumps(m.column_names)
        meta["mlcal_unseen"] = m.unseen
    if segmented and calibrated is None:
        graph, used["search"] = segmented_graph(m, np_dtype, index_search)
        imports = {"": int(opset), "ai.onnx.ml": SEGMENTED_ML_OPSET}
        ir_version = 0
        doc = ("mlcal segmented calibration map: scores [N] and one [N] input per segment "
               f"column ({', '.join(m.column_names)}) -> p_calibrated [N]. NaN scores give "
               "NaN; an unseen segment gets the shared map" + (
                   "" if m.unseen == "shared" else " -- here NaN (unseen='raise')") + ".")
    elif calibrated is None:
        g = GraphBuilder("mlcal_")
        p = build_map(g, "scores")
        g.rename(p, "p_calibrated")
        shape = [None] if k is None else [None, k]
        graph = helper.make_graph(
            g.nodes, "mlcal_calibrator",
            [helper.make_tensor_value_info("scores", elem, shape)],
            [helper.make_tensor_value_info("p_calibrated", elem, shape)], g.initializers)
        imports = {"": int(opset)}
        ir_version = 0
        doc = ("mlcal calibration map: scores [N] -> p_calibrated [N] (probability of the "
               "positive class). NaN scores give NaN." if k is None else
               f"mlcal multiclass calibration map: scores [N, {k}] (one column per class) -> "
               f"p_calibrated [N, {k}], rows summing to 1. A row with a NaN or infinite score "
               "gives a NaN row.")
    else:
        if segmented and X is not None:   # the base model's part of the frame
            base_X = calibrated._split_columns(X)[0]
            X = base_X if isinstance(base_X, pd.DataFrame) else None
        base = convert_base(calibrated.base_estimator, calibrated.score_source_, np_dtype,
                            int(opset), X=X)
        if segmented:
            names = getattr(calibrated.base_estimator, "feature_names_in_", None)
            if X is None and names is not None:   # the tensor X holds these columns
                meta["mlcal_base_columns"] = json.dumps([str(c) for c in names])
            graph, used["search"] = compose_segmented(base, m, calibrated.classes_,
                                                      calibrated.threshold, np_dtype,
                                                      index_search)
        elif k is None:
            graph = compose(base, build_map, calibrated.classes_, calibrated.threshold,
                            np_dtype)
        else:
            graph = compose_multiclass(base, build_map, calibrated.classes_, np_dtype)
        graph.name = "mlcal_calibrated_model"
        imports = {}
        for entry in base.opset_import:   # skl2onnx may list the default domain twice
            domain = "" if entry.domain == "ai.onnx" else entry.domain
            imports[domain] = max(imports.get(domain, 0), entry.version)
        # skl2onnx declares the lowest version its ops need; every op it emitted for target
        # `opset` keeps its meaning at `opset`, so declaring `opset` is exact
        imports[""] = int(opset)
        if segmented:
            imports["ai.onnx.ml"] = max(imports.get("ai.onnx.ml", 0), SEGMENTED_ML_OPSET)
        ir_version = base.ir_version
        meta.update(mlcal_score_source=calibrated.score_source_,
                    mlcal_base_model=type(calibrated.base_estimator).__name__)
        if k is None:   # a multiclass label is the argmax; the threshold plays no part
            meta["mlcal_threshold"] = repr(float(calibrated.threshold))
        inputs = ("X [N, n_features]" if X is None
                  else "one [N, 1] input per column (" + ", ".join(map(str, X.columns)) + ")")
        if segmented:
            inputs += (" and the segment column(s) " + ", ".join(m.column_names)
                       + " [N, 1] (an unseen segment gets the shared map" +
                       ("" if m.unseen == "shared" else ", here NaN (unseen='raise')") + ")")
        doc = (f"mlcal calibrated classifier: {inputs} -> label [N], probabilities "
               "[N, 2] = [1 - p, p]. NaN scores give NaN probabilities." if k is None else
               f"mlcal calibrated multiclass classifier: {inputs} -> label [N] (class of "
               f"highest calibrated probability), probabilities [N, {k}].")
    meta["mlcal_index_search"] = used["search"]
    opset_ids = [helper.make_opsetid(d, v) for d, v in sorted(imports.items())]
    model = helper.make_model(graph, opset_imports=opset_ids, producer_name="mlcal",
                              producer_version=__version__, doc_string=doc)
    model.ir_version = max(ir_version, helper.find_min_ir_version_for(opset_ids))
    _metadata(model, meta)
    onnx.checker.check_model(model, full_check=True)
    return model


def _multicalibrated_model(model, dtype, opset, index_search, X) -> onnx.ModelProto:
    """A CalibratedModel with a Multicalibration calibrator: the base model's graph (float64)
    feeding the multicalibration map, with the feature columns as [N, 1] inputs (the base's
    own input of that name where it reads the column)."""
    from mlcal import __version__
    from mlcal.maps import MAP_FORMAT_VERSION
    from mlcal.model import CalibratedModel
    from mlcal.multicalibration.onnx_export import ML_OPSET, compose_multicalibration

    if not isinstance(model, CalibratedModel):
        raise ValueError(f"cannot export {type(model).__name__}")
    if str(dtype) != "float64":
        raise ValueError("a multicalibrated model exports as a float64 graph only (the trees "
                         "compare the score and numeric features in double); got "
                         f"dtype={dtype!r}")
    _check_args(dtype, opset, index_search)
    model._check_fitted()
    m = model.calibrator_.map_
    if X is not None:   # the base model's part of the frame
        base_X = model._split_columns(X)[0]
        X = base_X if isinstance(base_X, pd.DataFrame) else None
    base = convert_base(model.base_estimator, model.score_source_, np.dtype(np.float64),
                        int(opset), X=X)
    graph = compose_multicalibration(base, m, model.classes_, model.threshold)
    graph.name = "mlcal_calibrated_model"
    imports = {}
    for entry in base.opset_import:
        domain = "" if entry.domain == "ai.onnx" else entry.domain
        imports[domain] = max(imports.get(domain, 0), entry.version)
    imports[""] = int(opset)
    imports["ai.onnx.ml"] = max(imports.get("ai.onnx.ml", 0), ML_OPSET)
    meta = {"mlcal_version": __version__, "mlcal_method": model.calibrator_.method_name,
            "mlcal_map_type": m.kind, "mlcal_map_format_version": MAP_FORMAT_VERSION,
            "mlcal_input_transform": m.input_transform, "mlcal_dtype": "float64",
            "mlcal_feature_columns": json.dumps(m.feature_names),
            "mlcal_score_source": model.score_source_,
            "mlcal_base_model": type(model.base_estimator).__name__,
            "mlcal_threshold": repr(float(model.threshold)), "mlcal_index_search": "trees"}
    names = getattr(model.base_estimator, "feature_names_in_", None)
    if X is None and names is not None:   # the tensor X holds these columns
        meta["mlcal_base_columns"] = json.dumps([str(c) for c in names])
    inputs = ("X [N, n_features]" if X is None
              else "one [N, 1] input per column (" + ", ".join(map(str, X.columns)) + ")")
    if m.feature_names:
        inputs += " and the feature column(s) " + ", ".join(m.feature_names) + " [N, 1]"
    doc = (f"mlcal multicalibrated classifier: {inputs} -> label [N], probabilities [N, 2] = "
           "[1 - p, p], tree_leaves [N, T] (the node reached in each tree).")
    opset_ids = [helper.make_opsetid(d, v) for d, v in sorted(imports.items())]
    out = helper.make_model(graph, opset_imports=opset_ids, producer_name="mlcal",
                            producer_version=__version__, doc_string=doc)
    out.ir_version = max(base.ir_version, helper.find_min_ir_version_for(opset_ids))
    _metadata(out, meta)
    onnx.checker.check_model(out, full_check=True)
    return out


_NUMPY_OF_ONNX = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
                  onnx.TensorProto.INT64: np.int64, onnx.TensorProto.BOOL: np.bool_,
                  onnx.TensorProto.STRING: object}


def input_feeds(model: onnx.ModelProto, X) -> dict:
    """The onnxruntime feed dict for ``X`` (a DataFrame or 2-D array) and an exported model.

    A per-column model (``to_onnx(..., X=frame)``) gets each column as an [N, 1] array of its
    input's type; a single-tensor model gets the whole array. Raises ``ValueError`` naming the
    missing columns when ``X`` lacks any of the graph's inputs.
    """
    import pandas as pd

    inputs = list(model.graph.input)
    types = {vi.name: _NUMPY_OF_ONNX.get(vi.type.tensor_type.elem_type) for vi in inputs}
    if len(inputs) == 1 and inputs[0].name == "X" and not (
            isinstance(X, pd.DataFrame) and list(X.columns) == ["X"]):
        return {"X": np.asarray(X, dtype=types["X"])}
    segments = _metadata_list(model, "mlcal_segment_columns")
    features = _metadata_list(model, "mlcal_feature_columns")
    extra = segments or features

    def column(n):   # a multicalibration feature read as text is fed its text
        col = X[n].to_numpy()
        if n in features and types[n] is object:
            return np.asarray([str(v) for v in col.tolist()], dtype=object).reshape(-1, 1)
        return col.astype(types[n]).reshape(-1, 1)

    if "X" in types and extra and isinstance(X, pd.DataFrame) and "X" not in X.columns:
        # a fused segmented or multicalibrated model with a tensor base input: X gets the
        # base model's columns (recorded at export), else the frame's other columns, as
        # CalibratedModel does
        base = _metadata_list(model, "mlcal_base_columns")
        feeds = {"X": np.asarray(X[base] if base else X.drop(columns=extra),
                                 dtype=types["X"])}
        feeds.update({n: column(n) for n in extra if n in types})
        return feeds
    if not isinstance(X, pd.DataFrame):
        raise ValueError(f"this model has one input per column {list(types)}; pass a "
                         "DataFrame with those columns")
    missing = [n for n in types if n not in X.columns]
    if missing:
        raise ValueError(f"the data has no column(s) {missing} that the ONNX model needs; "
                         f"its inputs are {list(types)}")
    return {n: column(n) for n in types}


def _metadata_list(model: onnx.ModelProto, key: str) -> list[str]:
    for entry in model.metadata_props:
        if entry.key == key:
            return list(json.loads(entry.value))
    return []


def save(model: onnx.ModelProto, path: str, *, overwrite: bool = False) -> str:
    """Write ``model`` to ``path`` atomically (a temporary file renamed over it); refuses to
    replace an existing file unless ``overwrite``."""
    from mlcal._atomic import write_atomic

    write_atomic(path, model.SerializeToString(), overwrite=overwrite)
    return path
