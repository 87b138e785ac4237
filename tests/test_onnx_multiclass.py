"""ONNX export of the multiclass maps and of multiclass CalibratedModels, run in onnxruntime,
the ONNX reference evaluator and onnxruntime-node, against ``predict_proba``.

Promise checked (see ``mlcal/onnx/_multiclass.py``): in float64 a one-vs-rest map whose class
maps are exact (step maps, identity linear maps) is bit-identical to ``predict_proba``; every
other map/dtype stays within ``error_bound``; a row holding NaN or +-inf gives a NaN row.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from mlcal.calibrators.catalog import available_calibrators
from mlcal.calibrators.multiclass import (MatrixScaling, OneVsRest, TemperatureScaling,
                                          VectorScaling)
from mlcal.calibrators.structured_scaling import (StructuredMatrixScaling,
                                                  StructuredVectorScaling, TemperatureMixScaling)
from mlcal.maps import LinearMap, SigmoidMap, StepMap
from mlcal.model import CalibratedModel
from mlcal.maps.multiclass import MulticlassMap, SoftmaxAffineMap
from mlcal.onnx import DEFAULT_OPSET, error_bound, to_onnx
from support.synthetic import multiclass_set
from test_onnx import run_all, run_node_batch, run_ort

K = 4
DTYPES = ("float64", "float32")


def _edge_rows(proba: bool) -> np.ndarray:
    """Rows with zero probabilities, one-hot rows, an all-zero row (probabilities) or extreme
    and tied logits."""
    if proba:
        return np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.0, 0.0],
                         [0.0, 0.0, 0.0, 0.0], [1e-300, 1e-320, 0.0, 1.0 - 1e-16],
                         [0.25, 0.25, 0.25, 0.25], [1e-7, 1e-7, 1e-7, 1.0 - 3e-7]])
    return np.array([[800.0, -800.0, 0.0, 1.0], [-1e4, 1e4, 3.0, -3.0], [0.0, 0.0, 0.0, 0.0],
                     [-745.0, -745.0, -745.0, -744.0], [1e6, 1e6, -1e6, 0.0],
                     [40.0, -40.0, 39.0, 38.0]])


@pytest.fixture(scope="module")
def data():
    z, p, y = multiclass_set(700, K, seed=3)
    return {"logits": z, "proba": p, "y": y}


def _fitted_maps(data) -> list[tuple[str, object, bool]]:
    """(name, map, proba input?) for OvR over every registered binary method and the three
    softmax scalings, each on probabilities and on logits, plus hand-made maps."""
    out = []
    for kind, proba in (("proba", True), ("logits", False)):
        s = data[kind]
        for name in available_calibrators():
            out.append((f"ovr-{name}-{kind}", OneVsRest(name).fit(s, data["y"]).map_, proba))
        for cls in (TemperatureScaling, VectorScaling, MatrixScaling, TemperatureMixScaling,
                    StructuredVectorScaling, StructuredMatrixScaling):
            out.append((f"{cls.__name__}-{kind}", cls().fit(s, data["y"]).map_, proba))
    rng = np.random.default_rng(5)
    zero_below_half = StepMap([0.5], [0.0, 1.0])
    out += [
        # every class maps scores < 0.5 to 0: such rows take the uniform rule
        ("ovr-step-zero-rows", MulticlassMap((zero_below_half,) * K), True),
        ("ovr-mixed", MulticlassMap((StepMap([0.2, 0.6], [0.1, 0.5, 0.9]),
                                     LinearMap([0.0, 0.3, 1.0], [0.05, 0.4, 0.95]),
                                     SigmoidMap(-3.0, 1.2),
                                     SigmoidMap(-1.0, 0.5, input_transform="sigmoid"))), True),
        ("softmax-full-extreme", SoftmaxAffineMap(rng.normal(0, 3, (K, K)), rng.normal(0, 5, K),
                                                  0.37, "logits"), False),
        ("softmax-diag-logp", SoftmaxAffineMap(rng.uniform(0.5, 2.0, K), rng.normal(0, 1, K),
                                               2.5, "log-probabilities"), True),
        # a measured floor inside the inputs' range and a uniform mixture
        ("softmax-floor-mix", SoftmaxAffineMap(rng.normal(1, 0.3, (K, K)), rng.normal(0, 1, K),
                                               0.8, "log-probabilities", uniform_weight=0.01,
                                               probability_floor=3e-3), True),
    ]
    return out


@pytest.fixture(scope="module")
def maps(data):
    return _fitted_maps(data)


def _inputs(data, proba: bool, dtype: str) -> np.ndarray:
    base = data["proba" if proba else "logits"][:300]
    return np.vstack([base, _edge_rows(proba)]).astype(dtype)


def _cases(maps, data):
    cases, refs = [], []
    for name, m, proba in maps:
        for dt in DTYPES:
            if dt == "float32" and isinstance(m, SoftmaxAffineMap) and m.input == "logits":
                continue   # refused, see test_float32_logits_softmax_is_refused
            x = _inputs(data, proba, dt)
            cases.append((to_onnx(m, dtype=dt), {"scores": x}))
            refs.append((name, m, dt, x))
    return cases, refs


def assert_matches(m, dt: str, x: np.ndarray, out: np.ndarray, where: str) -> None:
    assert out.shape == x.shape and out.dtype == np.dtype(dt), where
    ref = m(x.astype(np.float64))
    bound = error_bound(m, dt)
    if bound == 0.0:
        bad = np.flatnonzero((out != ref).any(axis=1))
        assert bad.size == 0, f"{where}: {bad.size} rows differ, e.g. row {x[bad[:1]]!r}"
    else:
        err = np.abs(out.astype(np.float64) - ref).max()
        assert err <= bound, f"{where}: max error {err:.3g} > bound {bound:.3g}"
        # under the trivial bound 1.0 (see map_error_bound) rows whose class probabilities
        # are not all tiny must still be close; e.g. float32 one-vs-rest on logits of 1e4,
        # where every class probability underflows to 0 and the row becomes uniform
        ok = np.ones(x.shape[0], dtype=bool)
        if isinstance(m, MulticlassMap):
            q = np.column_stack([cm(x[:, k].astype(np.float64)) for k, cm in enumerate(m.maps)])
            ok = q.sum(axis=1) >= 1e-6
        err = np.abs(out.astype(np.float64) - ref)[ok].max()
        assert err <= 1e-5, f"{where}: max error {err:.3g}"
    np.testing.assert_allclose(out.astype(np.float64).sum(axis=1), 1.0,
                               atol=1e-12 if dt == "float64" else 1e-6, err_msg=where)


# the reference evaluator also computes the Log of the floored scores and the divisions of
# all-zero rows, which the graph's Where then discards: numpy warns about them
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("runtime", ["onnxruntime", "reference", "node"])
def test_parity_with_predict_proba(runtime, maps, data, tmp_path):
    cases, refs = _cases(maps, data)
    for (name, m, dt, x), outs, case in zip(refs, run_all(runtime, cases, tmp_path), cases):
        assert_matches(m, dt, x, outs[0], f"{runtime}/{name}/{dt}")
        if runtime == "node":   # the same bits as Python's onnxruntime
            np.testing.assert_array_equal(outs[0], run_ort(*case)[0], err_msg=name)


def test_exact_one_vs_rest_maps_are_bit_identical_and_keep_the_uniform_rule(maps, data):
    exact = [(n, m, p) for n, m, p in maps
             if isinstance(m, MulticlassMap) and error_bound(m, "float64") == 0.0]
    # isotonic/histogram/BBQ... fitted maps and the hand-made step map are all exact
    assert len(exact) >= 6, [n for n, _, _ in exact]
    name, m, _ = next(t for t in exact if t[0] == "ovr-step-zero-rows")
    x = _inputs(data, True, "float64")
    out = run_ort(to_onnx(m), {"scores": x})[0]
    uniform = (x < 0.5).all(axis=1)
    assert uniform.sum() >= 3
    np.testing.assert_array_equal(out[uniform], 1.0 / K)
    np.testing.assert_array_equal(out, m(x))


def test_bounds_are_derived_not_trivial(maps):
    """Bounds that are finite where the derivation gives one, and close to what is measured."""
    by_name = {n: m for n, m, _ in maps}
    assert error_bound(by_name["TemperatureScaling-logits"], "float64") < 1e-14
    assert error_bound(by_name["TemperatureScaling-proba"], "float64") < 1e-10
    assert error_bound(by_name["ovr-platt-proba"], "float64") < 1e-13
    assert error_bound(by_name["ovr-isotonic-proba"], "float64") == 0.0
    assert error_bound(by_name["softmax-full-extreme"], "float32") == 1.0   # no export exists


def test_non_finite_rows_give_nan_rows(maps, data):
    for name, m, proba in maps:
        x = _inputs(data, proba, "float64")[:6].copy()
        x[1, 2], x[3, 0], x[4, 3] = np.nan, np.inf, -np.inf
        out = run_ort(to_onnx(m), {"scores": x})[0]
        bad = np.isnan(x).any(axis=1) | np.isinf(x).any(axis=1)
        assert np.isnan(out[bad]).all(), name
        assert np.isfinite(out[~bad]).all(), name
        with pytest.raises(ValueError, match="non-finite"):
            m(x)


@pytest.mark.parametrize("opset", [13, 18, 21])
def test_opsets(maps, data, opset):
    """Split takes its sizes as an input from opset 13 on; Max/Exp/Log/Where are unchanged."""
    for name, m, proba in maps:
        if name in ("ovr-mixed", "softmax-full-extreme", "MatrixScaling-proba"):
            x = _inputs(data, proba, "float64")
            assert_matches(m, "float64", x, run_ort(to_onnx(m, opset=opset), {"scores": x})[0],
                           f"opset {opset}/{name}")


def test_float32_logits_softmax_is_refused(maps):
    m = next(m for n, m, _ in maps if n == "MatrixScaling-logits")
    with pytest.raises(ValueError, match="float64 only"):
        to_onnx(m, dtype="float32")


def test_calibrator_export_contract(data):
    cal = VectorScaling().fit(data["proba"], data["y"])
    model = to_onnx(cal)
    onnx.checker.check_model(model, full_check=True)
    (inp,), (out,) = model.graph.input, model.graph.output
    dims = lambda vi: [d.dim_value or None for d in vi.type.tensor_type.shape.dim]  # noqa: E731
    assert (inp.name, out.name) == ("scores", "p_calibrated")
    assert dims(inp) == dims(out) == [None, K]
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["mlcal_method"] == "multiclass-vector"
    assert meta["mlcal_map_type"] == "softmax-affine"
    assert meta["mlcal_n_classes"] == str(K)
    ops = {n.op_type for n in model.graph.node}
    assert "MatMul" not in ops and {"Exp", "Log", "Split", "Max"} <= ops
    with pytest.raises(ValueError, match="unfitted"):
        to_onnx(TemperatureScaling())


# ------------------------------------------------------------------------------------------------
# fused: a skl2onnx-convertible base model + a multiclass calibrator in one graph
def _classification(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    t = X[:, 0] + 0.5 * X[:, 1] ** 2 - 0.3 * X[:, 2] + rng.normal(size=n) * 0.6
    return X, np.digitize(t, [0.0, 1.0, 2.0])


@pytest.fixture(scope="module")
def fused_models():
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _classification()
    bases = {"lr": make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
             "rf": RandomForestClassifier(25, min_samples_leaf=5, random_state=0)}
    out = []
    for key, base in bases.items():
        base.fit(X[:1000], y[:1000])
        scores = ["auto", "decision_function"] if key == "lr" else ["auto"]
        for score in scores:
            for method in ("temperature", "vector", "matrix", "isotonic", "platt", "histogram"):
                cm = CalibratedModel(base, method, score=score).fit(X[1000:2000], y[1000:2000])
                out.append((f"{key}/{score}/{method}", cm))
    return out, X[2000:]


def _base_scores(cm, X, dtype: str) -> np.ndarray:
    """The base model's [N, K] scores as skl2onnx computes them (an independent conversion)."""
    from skl2onnx import to_onnx as skl_to_onnx

    est = cm.base_estimator
    final = est.steps[-1][1] if hasattr(est, "steps") else est
    opts = {"zipmap": False}
    if cm.score_source_ == "decision_function":
        opts["raw_scores"] = True
    model = skl_to_onnx(est, X[:1].astype(dtype), options={id(final): opts},
                        target_opset=DEFAULT_OPSET)
    return run_ort(model, {"X": X.astype(dtype)})[1].astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_matches_predict_proba(fused_models, dtype):
    """The calibration stage keeps its promise on the base graph's own scores; end to end the
    graph is within the bound plus the base model's own ONNX error carried through the
    calibrator (|cal(s_onnx) - cal(s_sklearn)|, computed, not assumed): skl2onnx evaluates
    random-forest trees in float32 even in a double graph, and LR's float64 graph sums in
    another order than scikit-learn's BLAS."""
    models, X = fused_models
    checked = 0
    for name, cm in models:
        m = cm.calibrator_.map_
        if dtype == "float32" and isinstance(m, SoftmaxAffineMap) and m.input == "logits":
            with pytest.raises(ValueError, match="float64 only"):
                to_onnx(cm, dtype=dtype)
            continue
        model = to_onnx(cm, dtype=dtype)
        assert [o.name for o in model.graph.output] == ["label", "probabilities"]
        label, proba = run_ort(model, {"X": X.astype(dtype)})
        assert proba.shape == (X.shape[0], K) and proba.dtype == np.dtype(dtype)
        s_onnx = _base_scores(cm, X, dtype)
        stage = np.abs(proba - cm.calibrator_.predict_proba(s_onnx)).max()
        bound = error_bound(m, dtype)
        assert stage <= (bound if bound < 1.0 else 1e-5), f"{name}: {stage:.3g}"
        carried = np.abs(cm.calibrator_.predict_proba(s_onnx)
                         - cm.predict_proba(X)).max()
        err = np.abs(proba - cm.predict_proba(X)).max()
        assert err <= stage + carried + 1e-15, name
        if name.startswith("lr/"):   # no float32 trees: the base graph itself is close
            assert err <= (1e-9 if dtype == "float64" else 1e-4), f"{name}: {err:.3g}"
        np.testing.assert_array_equal(label, cm.classes_[np.argmax(proba, axis=1)])
        top2 = np.sort(cm.predict_proba(X), axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 2 * err
        np.testing.assert_array_equal(label[clear], cm.predict(X)[clear])
        checked += 1
    assert checked >= 12


def test_fused_string_labels_and_node_parity(fused_models, tmp_path):
    from sklearn.linear_model import LogisticRegression

    models, X = fused_models
    names = np.array(["ant", "bee", "cat", "dog"])
    Xtr, ytr = _classification(seed=1)
    base = LogisticRegression(max_iter=500).fit(Xtr[:1000], names[ytr[:1000]])
    cm = CalibratedModel(base, "matrix").fit(Xtr[1000:2000], names[ytr[1000:2000]])
    label, proba = run_ort(to_onnx(cm), {"X": X})
    np.testing.assert_array_equal(label, cm.classes_[np.argmax(proba, axis=1)])
    assert set(label) <= set(names)
    # the same graphs in onnxruntime-node give the same bits as in Python's onnxruntime
    # (linear bases: a float32 random forest's own probabilities already differ by ~1e-7
    # between onnxruntime-node 1.30 and onnxruntime 1.32, before any mlcal node)
    picked = [cm] + [c for n, c in models
                     if n.startswith("lr/") and n.endswith(("/vector", "/isotonic"))]
    cases = [(to_onnx(c, dtype=dt), {"X": X.astype(dt)}) for c in picked for dt in DTYPES
             if not (dt == "float32" and c.calibrator_.map_.kind == "softmax-affine"
                     and c.calibrator_.map_.input == "logits")]
    for (model, feeds), node_out in zip(cases, run_node_batch(cases, tmp_path)):
        for a, b in zip(run_ort(model, feeds), node_out):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
@pytest.mark.parametrize("score", ["auto", "margin"])
@pytest.mark.parametrize("method", ["temperature", "isotonic"])
def test_fused_multiclass_booster(library, score, method):
    """XGBoost/LightGBM multiclass through onnxmltools: the converted trees give the library's
    scores within float32 rounding, the fused graph is the calibrator applied to those scores
    (within its bound), and end to end it is within the calibrator's change over that gap."""
    pytest.importorskip(library)
    pytest.importorskip("onnxmltools")
    from mlcal.onnx._compose import convert_base

    X, y = _classification(seed=2)
    if library == "xgboost":
        import xgboost
        base = xgboost.XGBClassifier(n_estimators=30, max_depth=3, n_jobs=1)
    else:
        import lightgbm
        base = lightgbm.LGBMClassifier(n_estimators=30, num_leaves=15, verbose=-1, n_jobs=1)
    base.fit(X[:1000], y[:1000])
    cm = CalibratedModel(base, method, score=score).fit(X[1000:2000], y[1000:2000])
    Xt = X[2000:]
    label, proba = run_ort(to_onnx(cm), {"X": Xt})
    raw = run_ort(convert_base(base, cm.score_source_, np.dtype("float64"), DEFAULT_OPSET),
                  {"X": Xt})[1].astype(np.float64)
    raw_py = cm.predict_uncalibrated(Xt)
    eps32 = float(np.finfo(np.float32).eps)
    assert np.all(np.abs(raw - raw_py) <= 64 * eps32 * np.maximum(1.0, np.abs(raw_py)))
    stage = np.abs(proba - cm.calibrator_.predict_proba(raw)).max()
    assert stage <= error_bound(cm.calibrator_.map_, "float64")
    carried = np.abs(cm.calibrator_.predict_proba(raw) - cm.predict_proba(Xt)).max()
    assert np.abs(proba - cm.predict_proba(Xt)).max() <= stage + carried + 1e-15
    assert carried <= 1e-4
    assert (label == cm.predict(Xt)).mean() > 0.99
