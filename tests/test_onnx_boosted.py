"""Fused ONNX export of calibrated XGBoost/LightGBM models and of named-column pipelines,
checked in real onnxruntime against the Python models."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

ort = pytest.importorskip("onnxruntime")
xgboost = pytest.importorskip("xgboost")
lightgbm = pytest.importorskip("lightgbm")
pytest.importorskip("onnxmltools")

from mlcal.model import CalibratedModel  # noqa: E402
from mlcal.onnx import MissingConverterError, input_feeds, to_onnx  # noqa: E402
from mlcal.onnx._compose import convert_base  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(4000, 6, n_informative=4, weights=[0.8], random_state=7)
    return X[:2000], y[:2000], X[2000:3000], y[2000:3000], X[3000:], y[3000:]


@pytest.fixture(scope="module")
def boosters(data):
    Xtr, ytr = data[0], data[1]
    return {"xgboost": xgboost.XGBClassifier(n_estimators=40, max_depth=4, n_jobs=1).fit(Xtr, ytr),
            "lightgbm": lightgbm.LGBMClassifier(n_estimators=40, num_leaves=15, verbose=-1,
                                                n_jobs=1).fit(Xtr, ytr)}


def _run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
@pytest.mark.parametrize("score", ["auto", "margin"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_booster_export_matches_predict_proba(data, boosters, library, score, dtype):
    _, _, Xc, yc, Xt, _ = data
    model = CalibratedModel(boosters[library], "isotonic", score=score).fit(Xc, yc)
    onnx_model = to_onnx(model, dtype=dtype)
    assert any(o.domain == "ai.onnx.ml" for o in onnx_model.opset_import)
    label, proba = _run(onnx_model, input_feeds(onnx_model, Xt))
    assert proba.dtype == np.dtype(dtype)

    # 1) the converted trees reproduce the library's own score within float32 rounding
    base = convert_base(boosters[library], model.score_source_, np.dtype(dtype), 17)
    raw_onnx = _run(base, {"X": Xt.astype(dtype)})[1][:, 1].astype(np.float64)
    raw_py = model.predict_uncalibrated(Xt)
    tol = 64 * EPS32 * np.maximum(1.0, np.abs(raw_py))   # a few ulp of a 40-tree float32 sum
    assert np.all(np.abs(raw_onnx - raw_py) <= tol)
    # 2) the fused graph is exactly the map applied to those scores (float64: bit-identical)
    p_map = model.calibrator_.predict(raw_onnx)
    if dtype == "float64":
        np.testing.assert_array_equal(proba[:, 1], p_map)
    else:
        np.testing.assert_allclose(proba[:, 1], p_map, rtol=0, atol=1e-6)
    # 3) end to end against predict_proba: within the map's slope times the tree bound
    knots, values = model.calibrator_.map_.knots, model.calibrator_.map_.values
    dk = np.diff(knots)
    slope = np.max(np.abs(np.diff(values)[dk > 0] / dk[dk > 0]), initial=0.0)
    if model.calibrator_.map_.input_transform == "sigmoid":
        slope *= 0.25  # d sigmoid / d margin <= 1/4
    bound = slope * tol.max() + 1e-6
    gap = np.abs(proba[:, 1] - model.predict_proba(Xt)[:, 1])
    assert gap.max() <= bound, (gap.max(), bound)
    agree = label == model.predict(Xt)
    assert agree.mean() > 0.99


@pytest.fixture(scope="module")
def frame_data():
    rng = np.random.default_rng(5)
    n = 3000
    X, y = make_classification(n, 4, n_informative=3, n_redundant=1, random_state=11)
    df = pd.DataFrame(X, columns=["income", "age", "score", "tenure"])
    df["region"] = rng.choice(["north", "south", "east"], size=n)
    df["visits"] = rng.integers(0, 20, size=n).astype(np.int64)
    y = np.where(df["region"] == "east", 1 - y * (rng.random(n) < 0.3), y)
    return df, y


def _pipeline(final):
    ct = ColumnTransformer([("num", StandardScaler(), ["income", "age", "score", "tenure",
                                                       "visits"]),
                            ("cat", OneHotEncoder(handle_unknown="ignore"), ["region"])])
    return make_pipeline(ct, final)


@pytest.mark.parametrize("final, tol", [
    (LogisticRegression(max_iter=500), 1e-9),
    (xgboost.XGBClassifier(n_estimators=30, max_depth=3, n_jobs=1), 1e-4),
])
def test_named_mixed_columns_export_one_input_per_column(frame_data, final, tol):
    df, y = frame_data
    pipe = _pipeline(final).fit(df[:1500], y[:1500])
    model = CalibratedModel(pipe, "platt").fit(df[1500:2200], y[1500:2200])
    test = df[2200:]
    onnx_model = to_onnx(model, X=df[:5])
    inputs = {vi.name: vi.type.tensor_type.elem_type for vi in onnx_model.graph.input}
    assert list(inputs) == list(df.columns)
    assert inputs["region"] == 8 and inputs["visits"] == 7  # string, int64
    label, proba = _run(onnx_model, input_feeds(onnx_model, test))
    np.testing.assert_allclose(proba[:, 1], model.predict_proba(test)[:, 1], rtol=0, atol=tol)
    # without the sample rows, the single-tensor export fails with the way out in the message
    with pytest.raises(ValueError, match="pass X="):
        to_onnx(model)
    # a wrong column set is named before onnxruntime sees it
    with pytest.raises(ValueError, match=r"no column\(s\) \['region'\]"):
        input_feeds(onnx_model, test.drop(columns="region"))


def test_missing_converters_are_named(data):
    Xtr, ytr, Xc, yc, _, _ = data
    catboost = pytest.importorskip("catboost")
    cb = catboost.CatBoostClassifier(iterations=10, verbose=0, thread_count=1,
                                    allow_writing_files=False).fit(Xtr, ytr)
    with pytest.raises(MissingConverterError, match="CatBoost"):
        to_onnx(CalibratedModel(cb, "platt").fit(Xc, yc))
    # onnxmltools made unimportable in a fresh interpreter: the error names the package
    code = (
        "import sys; sys.modules['onnxmltools'] = None\n"
        "import numpy as np, xgboost\n"
        "from mlcal.model import CalibratedModel\n"
        "from mlcal.onnx import MissingConverterError, to_onnx\n"
        "rng = np.random.default_rng(0); X = rng.normal(size=(300, 3)); y = (X[:, 0] > 0) * 1\n"
        "m = CalibratedModel(xgboost.XGBClassifier(n_estimators=3).fit(X[:200], y[:200]),"
        " 'platt').fit(X[200:], y[200:])\n"
        "try:\n    to_onnx(m)\nexcept MissingConverterError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("ERR") and "onnxmltools" in out and "xgboost" in out
