"""ONNX export: the graphs give predict()'s numbers in three runtimes.

Oracles: ``map(x)`` / ``calibrator.predict`` / ``CalibratedModel.predict_proba`` in Python,
evaluated on the very values fed to the graph. Runtimes: onnxruntime (Python),
``onnx.reference.ReferenceEvaluator`` (pure numpy, written from the ONNX spec) and
onnxruntime-node (tests/node; install with
``cd tests/node && ONNXRUNTIME_NODE_INSTALL=skip npm install``; set ``MLCAL_REQUIRE_NODE=1`` to
make a missing install fail instead of skip).

Exactness promised and asserted (see ``mlcal.onnx.error_bound`` for the derivation):
float64 step and linear maps bit-identical; float32 step maps equal to ``predict(x)`` rounded to
float32; everything else within the derived bound.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from scipy.special import logit

import mlcal
from mlcal.calibrators.catalog import available_calibrators, get_calibrator
from mlcal.maps import (BETA_EPS, MAP_FORMAT_VERSION, BetaMap, LinearMap, QuadraticMap,
                        SigmoidMap, StepMap)
from mlcal.model import CalibratedModel
from mlcal.onnx import DEFAULT_OPSET, MIN_OPSET, error_bound, save, to_onnx
from mlcal.onnx._maps import pull_back_sigmoid

NODE_DIR = Path(__file__).parent / "node"
DTYPES = ("float64", "float32")


# ------------------------------------------------------------------------------------------------
# runtimes
class GatherElements(OpRun):
    """GatherElements from the spec (``out[i] = data[idx[i]]`` along ``axis``); the reference
    evaluator picks overrides by class name.

    onnx 1.23's reference kernel uses ``np.choose``, which accepts at most 64 choices, so it
    fails on any table longer than 64; every other op runs on the stock reference kernels.
    """

    def _run(self, data, indices, axis=None):
        return (np.take_along_axis(data, indices.astype(np.int64), axis=axis),)


def run_ort(model: onnx.ModelProto, feeds: dict) -> list:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_reference(model: onnx.ModelProto, feeds: dict) -> list:
    return ReferenceEvaluator(model, new_ops=[GatherElements]).run(None, feeds)


def _node_available() -> str | None:
    """None when node and onnxruntime-node are usable, else the reason."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_DIR / "node_modules" / "onnxruntime-node").is_dir():
        return ("onnxruntime-node is not installed; run: cd tests/node && "
                "ONNXRUNTIME_NODE_INSTALL=skip npm install")
    return None


def run_node_batch(cases: list[tuple[onnx.ModelProto, dict]], tmp: Path) -> list[list]:
    """Run every (model, feeds) in one node process; outputs in graph order."""
    reason = _node_available()
    if reason:
        if os.environ.get("MLCAL_REQUIRE_NODE"):
            pytest.fail(reason)
        pytest.skip(reason)
    jobs = []
    for i, (model, feeds) in enumerate(cases):
        onnx.save_model(model, str(tmp / f"m{i}.onnx"))
        inputs = {}
        for name, arr in feeds.items():
            arr = np.ascontiguousarray(arr)
            arr.tofile(tmp / f"x{i}_{name}.bin")
            inputs[name] = {"file": str(tmp / f"x{i}_{name}.bin"), "dtype": arr.dtype.name,
                            "shape": list(arr.shape)}
        jobs.append({"model": str(tmp / f"m{i}.onnx"), "inputs": inputs, "out": str(tmp / f"o{i}")})
    (tmp / "jobs.json").write_text(json.dumps({"cases": jobs}))
    proc = subprocess.run(["node", str(NODE_DIR / "run_onnx.js"), str(tmp / "jobs.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = []
    types = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32}
    for i, (model, _) in enumerate(cases):
        summary = {o["name"]: o for o in json.loads((tmp / f"o{i}.json").read_text())}
        outs = []
        for vi in model.graph.output:
            o = summary[vi.name]
            if o["dtype"] == "string":
                outs.append(np.array(json.loads(Path(o["file"]).read_text()), dtype=object))
            else:
                outs.append(np.fromfile(o["file"], dtype=types[o["dtype"]]).reshape(o["dims"]))
        results.append(outs)
    return results


def run_all(runtime: str, cases: list, tmp: Path) -> list[list]:
    if runtime == "node":
        return run_node_batch(cases, tmp)
    run = run_ort if runtime == "onnxruntime" else run_reference
    return [run(model, feeds) for model, feeds in cases]


# ------------------------------------------------------------------------------------------------
# maps under test: every registered calibrator (on probabilities and on raw margins) + hand-made
def _calibration_data(n=1200, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.001, 0.999, n)
    y = (rng.uniform(size=n) < p ** 2).astype(int)
    return p, 3.0 * logit(p), y


def registered_maps() -> list[tuple[str, object]]:
    p, margin, y = _calibration_data()
    out = []
    for name in available_calibrators():
        for label, scores in (("proba", p), ("margin", margin)):
            out.append((f"{name}-{label}", get_calibrator(name).fit(scores, y).map_))
    out.append(("isotonic-step", get_calibrator("isotonic", interpolate=False).fit(p, y).map_))
    # maps shrunk by the size cap (merged bins, dropped knots)
    for name, cap in (("kde", 40), ("isotonic", 6), ("enir", 12)):
        cal = get_calibrator(name, max_map_size=cap).fit(p, y)
        assert cal.map_reduction_.reduced
        out.append((f"{name}-capped", cal.map_))
    return out


def handmade_maps() -> list[tuple[str, object]]:
    rng = np.random.default_rng(7)
    clustered = np.unique(rng.beta(0.3, 3.0, 4000))
    steep = 0.3 + np.arange(1, 400) * np.spacing(0.3)        # narrower than a float32 ulp
    wide = np.sort(rng.normal(0.0, 50.0, 60))
    vals = lambda k: np.sort(rng.uniform(0, 1, k))           # noqa: E731
    return [
        ("step-1bin", StepMap([], [0.25])),
        ("step-clustered", StepMap(clustered, vals(clustered.size + 1))),
        ("step-steep", StepMap(steep, vals(steep.size + 1))),
        ("step-raw", StepMap(wide, vals(wide.size + 1))),
        ("step-sigmoid", StepMap([-0.5, 0.0, 1e-300, 0.2, 0.5, 0.999999, 1.0, 1.5],
                                 vals(9), input_transform="sigmoid")),
        ("step-sigmoid-big", StepMap(clustered, vals(clustered.size + 1),
                                     input_transform="sigmoid")),
        ("linear-1knot", LinearMap([0.4], [0.7])),
        ("linear-f32-knots", LinearMap(np.sort(rng.uniform(0, 1, 300).astype(np.float32)),
                                       vals(300))),
        ("linear-clustered", LinearMap(clustered, vals(clustered.size))),
        ("linear-steep", LinearMap(steep, vals(steep.size))),
        ("linear-raw", LinearMap(wide, vals(wide.size))),
        ("linear-sigmoid", LinearMap([0.05, 0.2, 0.5, 0.9, 0.97], [0.0, 0.1, 0.4, 0.8, 1.0],
                                     input_transform="sigmoid")),
        ("sigmoid", SigmoidMap(-2.5, 0.7)),
        ("sigmoid-sigmoid", SigmoidMap(-4.0, 2.0, input_transform="sigmoid")),
        ("beta", BetaMap(0.3, 2.5, -1.2)),
        ("beta-steep", BetaMap(40.0, 40.0, 3.0)),
        ("beta-decreasing", BetaMap(-1.5, 0.8, 0.2)),
        ("beta-constant", BetaMap(0.0, 0.0, 0.7)),
        ("beta-sigmoid", BetaMap(5.0, 0.5, 3.0, input_transform="sigmoid")),
        ("beta-sigmoid-steep", BetaMap(0.7, 12.0, -20.0, input_transform="sigmoid")),
        # data-taken clamps (issue #26): saturated scores keep their order down to lo
        ("beta-clamp", BetaMap(0.05, 0.07, 0.1, clamp=(1e-300, 1.0 - 2.0 ** -52))),
        ("beta-clamp-widest", BetaMap(1.0, 1.0, 0.0, clamp=(2.0 ** -1022, 1.0 - 2.0 ** -53),
                                      floor=1e-3)),
        ("beta-clamp-steep", BetaMap(3.0, 0.2, -1.0, clamp=(3e-200, 1.0 - 2.0 ** -40))),
        ("beta-clamp-sigmoid", BetaMap(0.1, 0.1, 0.3, clamp=(2.0 ** -900, 1.0 - 5 * 2.0 ** -53),
                                       input_transform="sigmoid")),
        ("quadratic-clamp", QuadraticMap(0.06, 1e-4, 0.2, clamp=(1e-300, 1.0 - 2.0 ** -52))),
        ("quadratic-clamp-bend", QuadraticMap(0.1, -0.01, 0.5, floor=1e-4,
                                              clamp=(2.0 ** -1022, 1.0 - 2.0 ** -53))),
        ("quadratic-clamp-sigmoid", QuadraticMap(0.05, 2e-4, 0.0, clamp=(1e-250, 1.0 - 2.0 ** -41),
                                                 input_transform="sigmoid")),
    ]


def _neighbours64(b: np.ndarray) -> list[np.ndarray]:
    return [b, np.nextafter(b, np.inf), np.nextafter(b, -np.inf)]


def _neighbours32(b: np.ndarray) -> list[np.ndarray]:
    with np.errstate(over="ignore"):
        b32 = b.astype(np.float32)
    up, down = np.nextafter(b32, np.float32(np.inf)), np.nextafter(b32, np.float32(-np.inf))
    return [b32, up, down, np.nextafter(up, np.float32(np.inf)),
            np.nextafter(down, np.float32(-np.inf))]


def probe_points(m, dtype: str, rng) -> np.ndarray:
    """Random scores, every breakpoint and the values just above and below it, in ``dtype``."""
    if isinstance(m, StepMap):
        br = m.thresholds
    elif isinstance(m, LinearMap):
        br = m.knots
    elif isinstance(m, BetaMap) or (isinstance(m, QuadraticMap) and m.on == "logit"):
        # the clamp's ends, 0, 1 and every octave towards 0 and 1 (down to 2**-1074 below)
        k = 2.0 ** -np.arange(1, 60)
        tiny = 2.0 ** -np.arange(60, 1075, 7.0)
        br = np.concatenate(([0.0, 1.0, BETA_EPS, 1.0 - BETA_EPS, 1e-300, 1.0 - 1e-17],
                             list(m.clamp), k, 1.0 - k, tiny))
    else:
        br = np.array([-m.b / m.a]) if m.a else np.array([0.0])
    br = br[np.isfinite(br)]
    if m.input_transform == "sigmoid":
        inner = br[(br > 0) & (br < 1)]
        raw = logit(inner)
        pts = [raw]
        if isinstance(m, StepMap):   # the exact raw-score boundary of each threshold
            pb = pull_back_sigmoid(m.thresholds)
            pts.append(pb[np.isfinite(pb)])
        br = np.concatenate(pts) if pts else np.array([0.0])
    lo, hi = (float(br.min()), float(br.max())) if br.size else (0.0, 1.0)
    pad = 0.1 * (hi - lo) + 0.1
    parts = [rng.uniform(lo - pad, hi + pad, 3000), rng.normal(0, 3, 500), np.array([0.0, 1.0])]
    parts += _neighbours64(br) if dtype == "float64" else _neighbours32(br)
    x = np.concatenate([np.asarray(a, dtype=np.float64) for a in parts])
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    return x[np.isfinite(x)]


def _expit32_map(m: SigmoidMap, x: np.ndarray) -> np.ndarray:
    """The sigmoid map evaluated in float32 arithmetic (scipy's expit formula, then the output
    floor's clip with float32 bounds)."""
    one = np.float32(1)
    s = x.astype(np.float32)
    if m.input_transform == "sigmoid":
        s = one / (one + np.exp(-s))
    z = np.float32(m.a) * s + np.float32(m.b)
    with np.errstate(over="ignore"):
        p = one / (one + np.exp(z))
    if m.floor == 0.0:
        return p
    return np.clip(p, np.float32(m.floor), np.float32(1.0 - m.floor))


def assert_matches_predict(m, dtype: str, x: np.ndarray, out: np.ndarray, where: str) -> None:
    """The promise for each map type and dtype (see module docstring)."""
    assert out.dtype == np.dtype(dtype) and out.shape == x.shape, where
    ref = m(x.astype(np.float64))
    err = np.abs(out.astype(np.float64) - ref)
    exact64 = isinstance(m, StepMap) or (isinstance(m, LinearMap)
                                         and m.input_transform == "identity")
    if dtype == "float64" and exact64:
        bad = np.flatnonzero(out != ref)
        assert bad.size == 0, f"{where}: {bad.size} values differ, e.g. x={x[bad[:3]]!r}"
    elif dtype == "float32" and isinstance(m, StepMap):
        bad = np.flatnonzero(out != ref.astype(np.float32))
        assert bad.size == 0, f"{where}: {bad.size} bins differ, e.g. x={x[bad[:3]]!r}"
    else:
        bound = error_bound(m, dtype)
        assert err.max() <= bound, f"{where}: max error {err.max():.3g} > bound {bound:.3g}"
    if dtype == "float32" and isinstance(m, SigmoidMap):
        # "predict evaluated in float32": same formula in float32; exp may differ by a few ulp
        ref32 = _expit32_map(m, x)
        assert np.all(np.abs(out - ref32) <= 6 * np.spacing(ref32) + 1e-30), where


@pytest.fixture(scope="module")
def all_maps():
    return registered_maps() + handmade_maps()


@pytest.mark.parametrize("runtime", ["onnxruntime", "reference", "node"])
def test_parity_with_predict(runtime, all_maps, tmp_path):
    """Every registered calibrator and every map type, float64 and float32, one runtime."""
    rng = np.random.default_rng(1)
    cases, meta = [], []
    for name, m in all_maps:
        for dtype in DTYPES:
            x = probe_points(m, dtype, rng)
            cases.append((to_onnx(m, dtype=dtype), {"scores": x}))
            meta.append((name, m, dtype, x))
    outs = run_all(runtime, cases, tmp_path)
    for (name, m, dtype, x), (out,) in zip(meta, outs):
        assert_matches_predict(m, dtype, x, out, f"{runtime}/{name}/{dtype}")


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # numpy: inf-inf
@pytest.mark.parametrize("runtime", ["onnxruntime", "reference", "node"])
def test_nan_and_infinite_scores_give_nan(runtime, all_maps, tmp_path):
    cases, meta = [], []
    for name, m in all_maps:
        for dtype in DTYPES:
            x = np.array([np.nan, 0.3, np.inf, -np.inf, 0.7, np.nan], dtype=dtype)
            cases.append((to_onnx(m, dtype=dtype), {"scores": x}))
            meta.append((name, dtype))
    for (name, dtype), (out,) in zip(meta, run_all(runtime, cases, tmp_path)):
        assert np.isnan(out[[0, 2, 3, 5]]).all(), f"{runtime}/{name}/{dtype}: {out}"
        assert np.isfinite(out[[1, 4]]).all(), f"{runtime}/{name}/{dtype}: {out}"


def test_python_predict_still_rejects_nan():
    cal = get_calibrator("isotonic").fit(*_calibration_data()[::2])
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="non-finite"):
            cal.predict([0.2, bad])


def test_float32_knot_tail_only_when_it_matters():
    """The tail correction is skipped when knots are float32 numbers already, kept otherwise."""
    rng = np.random.default_rng(3)
    knots32 = np.sort(rng.uniform(0, 1, 200).astype(np.float32)).astype(np.float64)
    knots64 = np.sort(rng.uniform(0, 1, 200))
    has_tail = [any("knot_tail" in i.name for i in to_onnx(LinearMap(k, np.linspace(0, 1, 200)),
                                                           dtype="float32").graph.initializer)
                for k in (knots32, knots64)]
    assert has_tail == [False, True]


def test_fitted_linear_maps_float32_bound_is_tight():
    """The derived float32 bound for real isotonic fits is far below the 1e-5 seen with a
    naive float32 interpolation graph, and every index-search design gives the same output."""
    p, margin, y = _calibration_data(n=5000, seed=3)
    m = get_calibrator("isotonic").fit(p, y).map_
    assert error_bound(m, "float32") < 5e-7
    x = probe_points(m, "float32", np.random.default_rng(0))
    outs = [run_ort(to_onnx(m, dtype="float32", index_search=s), {"scores": x})[0]
            for s in ("auto", "lut", "bsearch", "broadcast")]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    assert np.abs(outs[0] - m(x.astype(np.float64))).max() <= error_bound(m, "float32")


@pytest.mark.parametrize("search", ["lut", "bsearch", "broadcast"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_index_search_is_exact(search, dtype):
    """Clustered, adjacent-float and duplicate-after-rounding thresholds, each design."""
    rng = np.random.default_rng(5)
    t = np.unique(np.concatenate([rng.beta(0.3, 3.0, 1500),
                                  0.6 + np.arange(1, 300) * np.spacing(0.6)]))
    m = StepMap(t, np.linspace(0, 1, t.size + 1))
    x = probe_points(m, dtype, rng)
    out = run_ort(to_onnx(m, dtype=dtype, index_search=search), {"scores": x})[0]
    np.testing.assert_array_equal(out, m(x.astype(np.float64)).astype(dtype))


def test_sigmoid_pull_back_is_the_exact_boundary():
    from mlcal.maps import apply_input_transform

    def expit(v):                         # the very transform predict applies
        return apply_input_transform(np.asarray(v, dtype=np.float64), "sigmoid")

    t = np.concatenate([np.random.default_rng(2).uniform(0, 1, 500), [1e-300, 0.5, 1.0]])
    s = pull_back_sigmoid(t)
    assert np.isfinite(s).all()
    assert (expit(s) >= t).all()
    assert (expit(np.nextafter(s, -np.inf)) < t).all()
    np.testing.assert_array_equal(pull_back_sigmoid(np.array([0.0, -1.0, 1.5])),
                                  [-np.inf, -np.inf, np.inf])


# ------------------------------------------------------------------------------------------------
# composed model: skl2onnx base + calibration map
def _classification_data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = (X[:, 0] + 0.6 * X[:, 1] ** 2 - 0.4 * X[:, 2] + rng.normal(size=n) > 0.4).astype(int)
    return X, y


def _bases():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    return {"proba": make_pipeline(StandardScaler(), LogisticRegression()),
            "decision": make_pipeline(StandardScaler(), LinearSVC())}


def _base_scores_onnx(base, X32: np.ndarray, decision: bool) -> np.ndarray:
    """The base model's float32 score as skl2onnx computes it (independent conversion)."""
    from skl2onnx import to_onnx as skl_to_onnx

    final = base.steps[-1][1]
    opts = {"raw_scores": True} if decision else {"zipmap": False}
    model = skl_to_onnx(base, X32[:1], options={id(final): opts}, target_opset=DEFAULT_OPSET)
    return run_ort(model, {"X": X32})[1][:, -1].astype(np.float64)


@pytest.fixture(scope="module")
def calibrated_models():
    X, y = _classification_data()
    out = []
    for kind, base in _bases().items():
        base.fit(X[:1500], y[:1500])
        for name in available_calibrators():
            out.append((kind, name, CalibratedModel(base, name).fit(X[1500:3000], y[1500:3000])))
    return out, X[3000:]


def test_composed_float64_equals_predict_proba(calibrated_models):
    models, X = calibrated_models
    for kind, name, cm in models:
        model = to_onnx(cm, dtype="float64")
        onnx.checker.check_model(model, full_check=True)
        assert [o.name for o in model.graph.output] == ["label", "probabilities"]
        label, proba = run_ort(model, {"X": X})
        assert proba.shape == (X.shape[0], 2) and proba.dtype == np.float64
        err = np.abs(proba - cm.predict_proba(X)).max()
        assert err <= 1e-9, f"{kind}/{name}: {err:.3g}"
        np.testing.assert_array_equal(label, cm.predict(X))


def test_composed_float32(calibrated_models):
    """The calibration stage obeys the float32 promise on the base graph's own scores; end to
    end, predict_proba is matched within 1e-5 plus the base model's own float32 error carried
    through the map (|f(s_onnx) - f(s_sklearn)|, computed, not assumed)."""
    models, X = calibrated_models
    X32 = X.astype(np.float32)
    for kind, name, cm in models:
        label, proba = run_ort(to_onnx(cm, dtype="float32"), {"X": X32})
        assert proba.dtype == np.float32
        m = cm.calibrator_.map_
        s_onnx = _base_scores_onnx(cm.base_estimator, X32, kind == "decision")
        s_py = cm.predict_uncalibrated(X)
        assert_matches_predict(m, "float32", s_onnx.astype(np.float32), proba[:, 1],
                               f"composed/{kind}/{name}")
        carried = np.abs(m(s_onnx) - m(s_py))
        err = np.abs(proba[:, 1] - cm.predict_proba(X)[:, 1])
        # a steep map evaluated in float32 (e.g. ENIR after the sigmoid transform) may exceed
        # 1e-5 by itself; its derived float32 bound is then the honest promise
        allowed = max(1e-5, error_bound(m, "float32"))
        assert np.all(err <= allowed + carried), f"{kind}/{name}: {err.max():.3g}"
        if name == "platt":
            assert err.max() <= 1e-5
        np.testing.assert_array_equal(proba[:, 0], np.float32(1) - proba[:, 1])


def test_composed_in_node_matches_python_runtime(calibrated_models, tmp_path):
    models, X = calibrated_models
    cases = [(to_onnx(cm, dtype=dt), {"X": X.astype(dt)})
             for kind, name, cm in models if name in ("isotonic", "platt") for dt in DTYPES]
    for (model, feeds), node_out in zip(cases, run_node_batch(cases, tmp_path)):
        for a, b in zip(run_ort(model, feeds), node_out):
            np.testing.assert_array_equal(a, b)


def test_composed_string_labels_and_threshold():
    from sklearn.linear_model import LogisticRegression

    X, y = _classification_data(n=1500, seed=4)
    ys = np.where(y == 1, "yes", "no")
    base = LogisticRegression().fit(X[:500], ys[:500])
    cm = CalibratedModel(base, "histogram", threshold=0.3).fit(X[500:1000], ys[500:1000])
    label, proba = run_ort(to_onnx(cm), {"X": X[1000:]})
    np.testing.assert_array_equal(label, cm.predict(X[1000:]))
    assert set(label) == {"yes", "no"}
    np.testing.assert_array_equal(proba, cm.predict_proba(X[1000:]))


def test_composed_rejects_unconvertible_base():
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Custom(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            self.classes_, self.n_features_in_ = np.unique(y), X.shape[1]
            return self

        def predict_proba(self, X):
            p = 1 / (1 + np.exp(-X[:, 0]))
            return np.column_stack([1 - p, p])

    X, y = _classification_data(n=600)
    cm = CalibratedModel(Custom().fit(X, y), "platt").fit(X, y)
    with pytest.raises(ValueError, match="skl2onnx"):
        to_onnx(cm)


# ------------------------------------------------------------------------------------------------
# contract: opset, dtype, metadata, checker, errors, saving, CLI
def test_metadata_and_checker():
    p, _, y = _calibration_data()
    cal = get_calibrator("isotonic").fit(p, y)
    model = to_onnx(cal, dtype="float32")
    onnx.checker.check_model(model, full_check=True)
    meta = {e.key: e.value for e in model.metadata_props}
    assert meta["mlcal_version"] == mlcal.__version__
    assert meta["mlcal_method"] == "isotonic"
    assert meta["mlcal_map_type"] == "linear"
    assert meta["mlcal_map_format_version"] == str(MAP_FORMAT_VERSION)
    assert meta["mlcal_input_transform"] == "identity"
    assert meta["mlcal_dtype"] == "float32"
    assert meta["mlcal_index_search"] == "lut"
    assert model.graph.input[0].name == "scores"
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert model.graph.output[0].name == "p_calibrated"
    domains = {o.domain for o in model.opset_import}
    assert domains == {""}     # standard ai.onnx operators only


def test_opset_default_and_range():
    p, _, y = _calibration_data()
    m = get_calibrator("isotonic").fit(p, y).map_
    assert DEFAULT_OPSET == 17
    x = probe_points(m, "float64", np.random.default_rng(0))
    ref = m(x)
    for opset in (None, MIN_OPSET, 21):
        model = to_onnx(m) if opset is None else to_onnx(m, opset=opset)
        declared = {o.domain: o.version for o in model.opset_import}[""]
        assert declared == (opset or DEFAULT_OPSET)
        np.testing.assert_array_equal(run_ort(model, {"scores": x})[0], ref)
    for bad in (MIN_OPSET - 1, onnx.defs.onnx_opset_version() + 1, "17", True):
        with pytest.raises(ValueError, match="opset"):
            to_onnx(m, opset=bad)


def test_bad_arguments():
    with pytest.raises(ValueError, match="dtype"):
        to_onnx(SigmoidMap(1.0, 0.0), dtype="float16")
    with pytest.raises(ValueError, match="index_search"):
        to_onnx(StepMap([0.5], [0.1, 0.9]), index_search="magic")
    with pytest.raises(ValueError, match="not fitted"):
        to_onnx(get_calibrator("isotonic"))
    with pytest.raises(ValueError, match="cannot export"):
        to_onnx(np.array([1.0]))
    with pytest.raises(ValueError, match="overflows"):
        to_onnx(LinearMap([0.0, 1e-320], [0.0, 1.0]))


def test_save_refuses_to_overwrite(tmp_path):
    model = to_onnx(StepMap([0.5], [0.1, 0.9]))
    path = str(tmp_path / "m.onnx")
    save(model, path)
    with pytest.raises(FileExistsError):
        save(model, path)
    save(model, path, overwrite=True)
    assert onnx.load(path).graph.output[0].name == "p_calibrated"


def test_cli_export_onnx(tmp_path, capsys):
    from mlcal.cli import main

    p, _, y = _calibration_data()
    csv = tmp_path / "cal.csv"
    csv.write_text("score,y\n" + "\n".join(f"{float(a)!r},{b}" for a, b in zip(p, y)) + "\n")
    cal_json, out = tmp_path / "cal.json", tmp_path / "cal.onnx"
    assert main(["fit", "--method", "isotonic", "--data", str(csv), "--out", str(cal_json)]) == 0
    assert main(["export-onnx", "--calibrator", str(cal_json), "--out", str(out)]) == 0
    cal = mlcal.load_calibrator(str(cal_json))
    x = probe_points(cal.map_, "float64", np.random.default_rng(0))
    model = onnx.load(str(out))
    np.testing.assert_array_equal(run_ort(model, {"scores": x})[0], cal.predict(x))
    before = out.read_bytes()
    assert main(["export-onnx", "--calibrator", str(cal_json), "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert main(["export-onnx", "--calibrator", str(cal_json), "--out", str(out), "--force",
                 "--dtype", "float32", "--opset", "13"]) == 0
    model = onnx.load(str(out))
    assert {o.domain: o.version for o in model.opset_import}[""] == 13
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert main(["export-onnx", "--calibrator", str(tmp_path / "missing.json"),
                 "--out", str(tmp_path / "x.onnx")]) == 2
