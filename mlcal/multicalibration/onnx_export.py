"""ONNX export of a multicalibration map with standard operators.

Graph (float64 throughout; ai.onnx opset >= 13 and ai.onnx.ml opset 3, the version the
boosted-tree bases are converted with, so the graph can sit next to one):

* inputs: ``scores`` [N] (double) and one input per segment feature, named as the feature,
  [N]: double for a numeric feature, string for a categorical one;
* a categorical value becomes its code with ``ai.onnx.ml.LabelEncoder`` (category text ->
  code, any other text -> the "other" code; small integers, exact in float32 and double);
* one ``ai.onnx.ml.TreeEnsembleRegressor`` holds every tree, tree ``t`` writing target ``t``,
  with double thresholds (``nodes_values_as_tensor``) so that ``x <= threshold`` is decided in
  double exactly as in Python. A categorical node's set becomes a chain of ``BRANCH_EQ`` nodes
  (code == c goes to the left subtree, the last miss to the right one). Each leaf outputs its
  *node index* in the tree (a small integer, exact in the op's float output), so the routing can
  be compared exactly (output ``tree_leaves`` [N, T], int64);
* the leaf values are gathered in double from a table, summed (``ReduceSum``) and added to
  ``slope * (Log(s) - Log(1 - s)) + intercept`` with ``s`` clipped to ``[BETA_EPS, 1 -
  BETA_EPS]``; ``Sigmoid`` gives ``p_calibrated`` [N].

Exactness: routing (and so every leaf value) is identical to Python's. The rest differs from
Python only by rounding: the sum order (Python adds tree by tree), ``Log(1 - s)`` for
``log1p(-s)`` and the runtime's ``Log``/``Sigmoid`` for mlcal's deterministic ones.
:func:`error_bound` derives a per-row bound from those (each a few units of ``u = 2**-53``
relative to the magnitudes involved).
"""

from __future__ import annotations

import numpy as np

from mlcal.maps._core import BETA_EPS
from mlcal._optional import require
from mlcal.multicalibration.map import MulticalibrationMap

ML_OPSET = 3
U = 2.0 ** -53


class BaseScoreRoundingWarning(UserWarning):
    """A fused graph whose base model computes its score in float32 trees (XGBoost, LightGBM):
    the runtime's score can differ from the library's by a float32 rounding, and such scores
    are piecewise constant, so a test row's score often *equals* a tree threshold (thresholds
    are calibration scores). Such a row may then take the other branch than in Python. The
    routing is exact for the graph's own score; only the base score differs."""


def _map_of(obj) -> MulticalibrationMap:
    m = getattr(obj, "map_", obj)
    if not isinstance(m, MulticalibrationMap):
        raise ValueError(f"expected a fitted Multicalibration or a MulticalibrationMap, got "
                         f"{type(obj).__name__}")
    return m


def _tree_nodes(m: MulticalibrationMap):
    """The TreeEnsembleRegressor attribute lists: every tree's nodes, categorical sets
    unrolled into BRANCH_EQ chains, leaves weighted by their node index."""
    cols = {k: [] for k in ("tree", "node", "feature", "mode", "value", "true", "false")}
    leaves = {k: [] for k in ("tree", "node", "target", "weight")}
    for t, tree in enumerate(m.trees):
        next_id = [0]

        def new_id():
            next_id[0] += 1
            return next_id[0] - 1

        def emit(k: int) -> int:   # returns the ONNX id of node k's subtree root
            f = int(tree.feature[k])
            if f < 0:
                nid = new_id()
                _node(cols, t, nid, 0, "LEAF", 0.0, 0, 0)
                leaves["tree"].append(t)
                leaves["node"].append(nid)
                leaves["target"].append(t)
                leaves["weight"].append(float(k))
                return nid
            if m.features[f].kind != "categorical":
                nid = new_id()
                slot = len(cols["node"])
                _node(cols, t, nid, f, "BRANCH_LEQ", float(tree.threshold[k]), 0, 0)
                cols["true"][slot] = emit(int(tree.left[k]))
                cols["false"][slot] = emit(int(tree.right[k]))
                return nid
            codes = tree.category_set[k]
            chain = [(new_id(), len(cols["node"]) + j) for j in range(len(codes))]
            for (nid, _), c in zip(chain, codes):
                _node(cols, t, nid, f, "BRANCH_EQ", float(c), 0, 0)
            left = emit(int(tree.left[k]))
            right = emit(int(tree.right[k]))
            for j, (nid, slot) in enumerate(chain):
                cols["true"][slot] = left
                cols["false"][slot] = chain[j + 1][0] if j + 1 < len(chain) else right
            return chain[0][0]

        emit(0)
    return cols, leaves


def _node(cols, t, nid, f, mode, value, true, false) -> None:
    cols["tree"].append(t)
    cols["node"].append(nid)
    cols["feature"].append(f)
    cols["mode"].append(mode)
    cols["value"].append(value)
    cols["true"].append(true)
    cols["false"].append(false)


def multicalibration_nodes(g, scores: str, features: list[str], m: MulticalibrationMap
                           ) -> tuple[str, str]:
    """The map's nodes on ``scores`` (double [N]) and one [N] tensor per segment feature
    (double for a numeric feature, string for a categorical one, in ``m.features[1:]``
    order); returns ``(p, tree_leaves)``: the calibrated probability [N] double and the node
    index reached in each tree [N, T] int64 (see the module notes)."""
    from onnx import TensorProto, numpy_helper

    axis1 = g.const(np.array([1], dtype=np.int64), "axis1")
    columns = [g.op("Unsqueeze", [scores, axis1])]
    for spec, x in zip(m.features[1:], features):
        if spec.kind == "numeric":
            col = x
        else:
            codes = g.op("LabelEncoder", [x], "codes", domain="ai.onnx.ml",
                         keys_strings=list(spec.categories),
                         values_floats=[float(i) for i in range(len(spec.categories))],
                         default_float=float(len(spec.categories)))
            col = g.op("Cast", [codes], to=TensorProto.DOUBLE)
        columns.append(g.op("Unsqueeze", [col, axis1]))
    x = g.op("Concat", columns, "x", axis=1) if len(columns) > 1 else columns[0]

    sc = g.op("Clip", [scores, g.const(np.float64(BETA_EPS)),
                       g.const(np.float64(1.0 - BETA_EPS))], "sc")
    one_minus = g.op("Sub", [g.const(np.float64(1.0)), sc])
    logit = g.op("Sub", [g.op("Log", [sc]), g.op("Log", [one_minus])], "logit")
    z = g.op("Add", [g.op("Mul", [logit, g.const(np.float64(m.slope))]),
                     g.const(np.float64(m.intercept))], "z0")
    n_trees = len(m.trees)
    if n_trees:
        cols, leaves = _tree_nodes(m)
        leaf_f = g.op("TreeEnsembleRegressor", [x], "leaf_f", domain="ai.onnx.ml",
                      n_targets=n_trees, aggregate_function="SUM", post_transform="NONE",
                      nodes_treeids=cols["tree"], nodes_nodeids=cols["node"],
                      nodes_featureids=cols["feature"], nodes_modes=cols["mode"],
                      nodes_values_as_tensor=numpy_helper.from_array(
                          np.asarray(cols["value"], dtype=np.float64), "nodes_values"),
                      nodes_truenodeids=cols["true"], nodes_falsenodeids=cols["false"],
                      nodes_missing_value_tracks_true=[0] * len(cols["node"]),
                      target_treeids=leaves["tree"], target_nodeids=leaves["node"],
                      target_ids=leaves["target"], target_weights=leaves["weight"])
        leaf = g.op("Cast", [leaf_f], "leaf", to=TensorProto.INT64)
        offsets = np.cumsum([0] + [t.n_nodes for t in m.trees[:-1]]).astype(np.int64)
        table = np.concatenate([t.value for t in m.trees]).astype(np.float64)
        flat = g.op("Add", [leaf, g.const(offsets[None, :], "offsets")])
        values = g.op("Gather", [g.const(table, "leaf_values"), flat], "values")
        z = g.op("Add", [z, g.op("ReduceSum", [values, axis1], keepdims=0)], "z")
    else:
        leaf = g.op("Cast", [g.op("ConstantOfShape", [g.op("Concat", [g.op(
            "Shape", [scores]), g.const(np.array([0], dtype=np.int64))], axis=0)])],
            to=TensorProto.INT64)
    return g.op("Sigmoid", [z], "p"), leaf


def to_onnx(obj, *, opset: int = 17):
    """The map of a fitted :class:`~mlcal.multicalibration.Multicalibration` (or a
    :class:`~mlcal.multicalibration.MulticalibrationMap`) as an ONNX model.

    Parameters
    ----------
    obj : Multicalibration or MulticalibrationMap
    opset : int, default=17
        ai.onnx opset (13 or later); ai.onnx.ml is version 3.

    Returns
    -------
    onnx.ModelProto
        Inputs ``scores`` [N] double and one [N] input per feature (double or string);
        outputs ``p_calibrated`` [N] double and ``tree_leaves`` [N, T] int64 (the node
        index reached in each tree). Checked with ``onnx.checker.check_model``.
    """
    require("onnx", "onnx")
    import onnx
    from onnx import TensorProto, helper

    from mlcal import __version__
    from mlcal.onnx._graph import GraphBuilder

    if not 13 <= int(opset) <= onnx.defs.onnx_opset_version():
        raise ValueError(f"opset must be between 13 and {onnx.defs.onnx_opset_version()}, "
                         f"got {opset!r}")
    m = _map_of(obj)
    g = GraphBuilder("mlcal_")
    inputs = [helper.make_tensor_value_info("scores", TensorProto.DOUBLE, [None])]
    for spec in m.features[1:]:
        inputs.append(helper.make_tensor_value_info(
            spec.name, TensorProto.DOUBLE if spec.kind == "numeric" else TensorProto.STRING,
            [None]))
    p, leaf = multicalibration_nodes(g, "scores", m.feature_names, m)
    n_trees = len(m.trees)
    outputs = [helper.make_tensor_value_info("p_calibrated", TensorProto.DOUBLE, [None]),
               helper.make_tensor_value_info("tree_leaves", TensorProto.INT64,
                                             [None, n_trees])]
    g.rename(p, "p_calibrated")
    g.rename(leaf, "tree_leaves")
    graph = helper.make_graph(g.nodes, "mlcal_multicalibration", inputs, outputs,
                              g.initializers)
    opsets = [helper.make_opsetid("", int(opset)), helper.make_opsetid("ai.onnx.ml", ML_OPSET)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="mlcal",
                              producer_version=__version__,
                              doc_string="mlcal multicalibration map: scores [N] and one "
                                         "[N] input per segment feature -> p_calibrated [N]")
    model.ir_version = helper.find_min_ir_version_for(opsets)
    for key, value in (("mlcal_version", __version__), ("mlcal_map_type", m.kind),
                       ("mlcal_features", ",".join(m.feature_names))):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, str(value)
    onnx.checker.check_model(model, full_check=True)
    return model


def feature_inputs(graph, g, m: MulticalibrationMap) -> list[str]:
    """One [N] tensor per segment feature for :func:`multicalibration_nodes` in a graph fused
    with the base model: the base graph's own input of that name when it has one (a column
    the base model reads, [N, 1], reshaped; a numeric feature read as float or int64 is cast
    to double, exactly), else a new graph input of that name, [N, 1], double for a numeric
    feature and string for a categorical one (its text, as Python reads it). Appends the new
    inputs to ``graph``."""
    from onnx import TensorProto, helper

    existing = {vi.name: vi for vi in graph.input}
    flat = g.const(np.array([-1], dtype=np.int64), "flat")
    out = []
    for spec in m.features[1:]:
        want = TensorProto.DOUBLE if spec.kind == "numeric" else TensorProto.STRING
        if spec.name not in existing:
            graph.input.append(helper.make_tensor_value_info(spec.name, want, [None, 1]))
        x = g.op("Reshape", [spec.name, flat], f"feature_{spec.kind}")
        have = existing[spec.name].type.tensor_type.elem_type if spec.name in existing \
            else want
        if have != want:
            if spec.kind != "numeric" or have not in (TensorProto.FLOAT, TensorProto.INT64,
                                                      TensorProto.INT32):
                raise ValueError(f"feature {spec.name!r} ({spec.kind}) is an input of the base "
                                 f"model's graph of ONNX type "
                                 f"{TensorProto.DataType.Name(have)}; a {spec.kind} feature "
                                 f"needs {TensorProto.DataType.Name(want)}")
            x = g.op("Cast", [x], "feature_double", to=TensorProto.DOUBLE)
        out.append(x)
    return out


def _reads_float32(graph, node) -> bool:
    """Whether the tree ensemble ``node`` reads a float32 Cast (mlcal's booster conversion
    casts the trees' input to float32, as XGBoost and LightGBM compare)."""
    from onnx import TensorProto

    producers = {o: n for n in graph.node for o in n.output}
    src = producers.get(node.input[0])
    return src is not None and src.op_type == "Cast" and any(
        a.name == "to" and a.i == TensorProto.FLOAT for a in src.attribute)


def compose_multicalibration(base, m: MulticalibrationMap, classes, threshold: float):
    """The base model's graph (float64) followed by the multicalibration map, reading its
    score column and the feature inputs (:func:`feature_inputs`); outputs ``label`` and
    ``probabilities`` [N, 2] as for any binary CalibratedModel, plus ``tree_leaves`` [N, T]
    (the node index reached in each tree, for checking the routing)."""
    from onnx import TensorProto, helper

    from mlcal.onnx._compose import (_attach, _detach_outputs, classifier_outputs,
                                     score_column)
    from mlcal.onnx._graph import GraphBuilder

    f64 = np.dtype(np.float64)
    graph, score_vi = _detach_outputs(base)
    if any(n.op_type == "TreeEnsembleClassifier" and n.domain == "ai.onnx.ml"
           and _reads_float32(graph, n) for n in graph.node) and any(
            (t.feature == 0).any() for t in m.trees):
        import warnings

        warnings.warn(
            "the base model's score comes from float32 trees: onnxruntime's score may differ "
            "from the library's by a float32 rounding, and a row whose score lies on one of "
            "the multicalibration trees' score thresholds then takes the other branch (its "
            "probability moves by that tree's leaf difference). Routing is exact for the "
            "graph's own score; compare with Python on the graph's scores, or calibrate a "
            "base whose ONNX score is exact (see docs/multicalibration.md)",
            BaseScoreRoundingWarning, stacklevel=3)
    g = GraphBuilder("mlcal_")
    scores = score_column(g, score_vi, f64)
    p, leaf = multicalibration_nodes(g, scores, feature_inputs(graph, g, m), m)
    label, proba, label_type = classifier_outputs(g, p, classes, threshold, f64)
    g.rename(leaf, "tree_leaves")
    _attach(graph, g, label, proba, label_type, f64, 2)
    graph.output.append(helper.make_tensor_value_info("tree_leaves", TensorProto.INT64,
                                                      [None, len(m.trees)]))
    return graph


def error_bound(obj, scores, features=None) -> np.ndarray:
    """Per-row bound on ``|p_onnx - p_python|`` for the graph of :func:`to_onnx`.

    With routing identical, ``z`` differs only by rounding: the logit (each ``Log`` within a
    few ulp, and ``Log(1 - s)`` against ``log1p(-s)``: ``1 - s`` rounds by at most ``u``
    relative, so ``|log(fl(1 - s)) - log(1 - s)| <= ~u``), the affine start, and the two
    summation orders of ``T`` leaf values (each within ``T u`` of the magnitudes summed).
    With ``c = 4 (T + 4) u`` and ``L = |ln s| + |ln(1 - s)| + 2``:
    ``|dz| <= c (|slope| L + |intercept| + sum |v_t| + |z|)``; the sigmoid's slope is at
    most 1/4 and each side's sigmoid is within a few ulp of the exact one, so
    ``|dp| <= |dz| / 4 + 8 u``.
    """
    m = _map_of(obj)
    x = m.feature_matrix(scores, features)
    sc = np.clip(x[:, 0], BETA_EPS, 1.0 - BETA_EPS)
    big_l = np.abs(np.log(sc)) + np.abs(np.log1p(-sc)) + 2.0
    abs_m = MulticalibrationMap(0.0, 0.0, m.features, tuple(
        type(t)(t.feature, t.threshold, t.category_set, t.left, t.right, np.abs(t.value))
        for t in m.trees))
    sum_abs = abs_m.margin_of_matrix(x)
    z = m.margin_of_matrix(x)
    c = 4.0 * (len(m.trees) + 4) * U
    dz = c * (abs(m.slope) * big_l + abs(m.intercept) + sum_abs + np.abs(z))
    return dz / 4.0 + 8.0 * U
