"""The segmented map exported to ONNX and run by onnxruntime: within ``error_bound`` of
``predict`` (exact where the shared map's graph is), unseen segments giving the shared map's
output (or NaN under unseen='raise', which ONNX cannot raise), one or several typed key columns
(string, 64-bit integer beyond 2^53, boolean), float32 graphs."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest

import mlcal
from mlcal.maps import BetaMap, StepMap
from mlcal.onnx import error_bound, to_onnx
from mlcal.maps.segmented import SegmentedMap

COUNTRIES = ["FR", "DE", "IT", "l'été \"x\""]


def _fit(seed, **params):
    rng = np.random.default_rng(seed)
    n = 1200
    seg = pd.DataFrame({"country": rng.choice(COUNTRIES, n), "tier": rng.integers(-1, 2, n),
                        "flag": rng.random(n) < 0.5})
    s = rng.random(n)
    z = 1.5 * (np.log(s) - np.log1p(-s)) + seg["country"].map(
        dict(zip(COUNTRIES, [0.7, -0.6, 0.0, 0.4]))).to_numpy() + 0.3 * seg["tier"]
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(int)
    return mlcal.SegmentedCalibrator(n_folds=None, **params).fit(s, y, seg)


def _rows(seed, n=3000):
    rng = np.random.default_rng(seed)
    s = np.concatenate([[0.0, 1.0, 5e-324, 1e-300, 0.5, 1 - 1e-16], rng.random(n - 6)])
    return s, pd.DataFrame({"country": rng.choice(COUNTRIES + ["PT", ""], n),
                            "tier": rng.integers(-1, 3, n), "flag": rng.random(n) < 0.5})


def _run(model, scores, seg, dtype=np.float64):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"scores": np.asarray(scores, dtype=dtype)}
    for i in sess.get_inputs()[1:]:
        col = seg[i.name].to_numpy()
        feeds[i.name] = col.astype(object) if i.type == "tensor(string)" else \
            col.astype(bool if i.type == "tensor(bool)" else np.int64)
    return sess.run(None, feeds)[0]


@pytest.mark.parametrize("params, dtype", [
    ({"method": "isotonic", "min_rows_for_slope": 40}, "float64"),
    ({"method": "platt"}, "float64"),
    ({"method": "beta", "min_rows_for_slope": 40}, "float64"),
    ({"method": "histogram", "min_rows_for_slope": 40}, "float32"),
])
def test_runtime_output_is_within_the_bound_and_unseen_rows_get_the_shared_map(params, dtype):
    cal = _fit(1, **params)
    model = to_onnx(cal, dtype=dtype)
    assert [i.name for i in model.graph.input] == ["scores", "country", "tier", "flag"]
    s, seg = _rows(2)
    if dtype == "float32":
        s = s.astype(np.float32).astype(np.float64)
    got = _run(model, s, seg, np.dtype(dtype)).astype(np.float64)
    expected = cal.predict(s, seg)
    bound = error_bound(cal.map_, dtype)
    err = np.abs(got - expected)
    assert err.max() <= bound, (err.max(), bound)
    unseen = ~seg["country"].isin(COUNTRIES).to_numpy() | (seg["tier"] == 2).to_numpy()
    assert unseen.sum() > 500
    q = cal.map_.inner(s)
    assert (expected[~unseen] != q[~unseen]).mean() > 0.8
    if params["method"] in ("isotonic", "histogram") and dtype == "float64":
        assert bound < 1e-13   # the shared map's graph is exact: only the stage's roundings
        assert np.array_equal(got[unseen], q[unseen])
    if params.get("min_rows_for_slope"):
        assert (cal.map_.slopes != 1.0).any()
    print(params, dtype, "max error", err.max(), "bound", bound)


def test_raise_gives_nan_and_wide_integer_keys_are_exact():
    big = 2 ** 62 + 1
    m = SegmentedMap(BetaMap(1.3, 0.7, -0.2, input_transform="sigmoid"), (("id", "integer"),),
                     ((big,), (big + 2,), (-2 ** 63,), (2 ** 63 - 1,)),
                     [1.0, 1.0, 1.0, 1.0], [0.3, -1.0, 0.0, 2.5], unseen="raise")
    ids = np.array([big, big + 2, big + 1, -2 ** 63, 2 ** 63 - 1, 2 ** 53, 0] * 20,
                   dtype=np.int64)
    x = np.random.default_rng(3).normal(0, 3, ids.size)
    x[:2] = np.nan
    model = to_onnx(m)
    got = _run(model, x, pd.DataFrame({"id": ids}))
    seen = np.isin(ids, [big, big + 2, -2 ** 63, 2 ** 63 - 1])
    assert np.isnan(got[~seen]).all() and np.isnan(got[:2]).all()
    ok = seen & ~np.isnan(x)
    expected = SegmentedMap(m.inner, m.columns, m.keys, m.slopes, m.offsets)(
        x[ok], pd.DataFrame({"id": ids[ok]}))
    assert np.abs(got[ok] - expected).max() <= error_bound(m)
    # a step shared map reaching 0 and 1 exactly: they pass through
    step = SegmentedMap(StepMap([0.3, 0.6], [0.0, 0.4, 1.0]), (("b", "boolean"),),
                        ((True,), (False,)), [1.5, 1.0], [2.0, -1.0])
    x = np.linspace(0, 1, 101)
    b = np.arange(101) % 2 == 0
    got = _run(to_onnx(step), x, pd.DataFrame({"b": b}))
    expected = step(x, pd.DataFrame({"b": b}))
    assert (expected == 0).any() and (expected == 1).any()
    assert np.abs(got - expected).max() <= error_bound(step)
    assert np.array_equal(got[expected == 0], expected[expected == 0])


def _model_data(seed=7, n=3000):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                      "tier": rng.integers(0, 3, n), "country": rng.choice(COUNTRIES, n)})
    shift = X["country"].map(dict(zip(COUNTRIES, [0.6, -0.5, 0.0, 0.4]))).to_numpy()
    y = (rng.random(n) < 1 / (1 + np.exp(-(1.3 * X["a"] - 0.8 * X["b"] + 0.2 * X["tier"]
                                             + shift)))).astype(int)
    return X, y


@pytest.mark.parametrize("case", ["named", "named-with-segment-feature", "array",
                                  "pipeline-per-column"])
def test_fused_with_the_base_model(case):
    """A CalibratedModel with segment columns: the base model's graph feeds the map. The
    segment columns are extra [N, 1] inputs, or the base model's own per-column input where
    it reads the column ('tier' is a feature and a segment column); a base exported with a
    tensor input X keeps it."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from mlcal.onnx import input_feeds

    X, y = _model_data()
    segments = ["country", "tier"]
    if case == "array":   # fitted on an array: no feature names
        base = LogisticRegression().fit(X[["a", "b", "tier"]].to_numpy()[:1000], y[:1000])
        segments = ["country"]
    elif case == "pipeline-per-column":
        base = make_pipeline(ColumnTransformer([("num", StandardScaler(), ["a", "b", "tier"])]),
                             LogisticRegression()).fit(X[["a", "b", "tier"]][:1000], y[:1000])
    else:
        cols = ["a", "b"] if case == "named" else ["a", "b", "tier"]
        base = LogisticRegression().fit(X[cols][:1000], y[:1000])
    model = mlcal.CalibratedModel(base, "platt", segment_columns=segments).fit(
        X[1000:2000], y[1000:2000])
    test = X[2000:].copy()
    test.loc[test.index[::7], "country"] = "PT"   # unseen
    onx = to_onnx(model, X=test[:5] if case == "pipeline-per-column" else None)
    names = [i.name for i in onx.graph.input]
    assert names == (["a", "b", "tier", "country"] if case == "pipeline-per-column"
                     else ["X", *segments])
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    label, proba = sess.run(None, input_feeds(onx, test))
    expected = model.predict_proba(test)
    # the base model's graph adds its own rounding to the score (skl2onnx's logistic
    # regression); the map's bound applies to the calibration stage alone
    err = np.abs(proba - expected).max()
    assert err < 1e-9, err
    assert np.array_equal(label, model.predict(test))
