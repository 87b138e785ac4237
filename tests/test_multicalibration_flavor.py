"""CalibratedModel(feature_columns=...) with a Multicalibration calibrator (#30): the feature
columns are read from the input frame, the MLflow flavour stores the map as validated JSON
with the feature columns in the signature and the flavour section (checked on save and load),
a real `mlflow models serve` on 127.0.0.1 returns the same probabilities bit for bit, and the
ONNX export fused with the base model routes every row exactly as Python does (on the graph's
own base score) with probabilities within the standalone export's derived bound."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

import mlcal
from mlcal.model import FeatureColumnsError

mlflow = pytest.importorskip("mlflow")

from mlcal.mlflow import ModelIntegrityError, load_model, save_model  # noqa: E402

REQS = ["scikit-learn", "numpy", "pandas"]
REGIONS = ["north", "south", "east", "l'ouest \"x\""]


def _data(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                       "region": rng.choice(REGIONS, n), "age": rng.uniform(18, 80, n),
                       "member": rng.random(n) < 0.4})
    shift = df["region"].map(dict(zip(REGIONS, [0.9, -0.7, 0.0, 0.4]))).to_numpy() \
        + 0.03 * (df["age"].to_numpy() - 50) + 0.5 * df["member"].to_numpy()
    eta = 1.2 * df["a"].to_numpy() - 0.8 * df["b"].to_numpy() + shift
    y = (rng.random(n) < expit(eta)).astype(int)
    return df, y


FEATURES = ["region", "age", "member"]


def _multical():
    return mlcal.Multicalibration(max_iter=40, learning_rate=0.3, max_depth=3)


@pytest.fixture(scope="module")
def fitted():
    df, y = _data()
    base = LogisticRegression().fit(df[["a", "b"]][:2000], y[:2000])
    model = mlcal.CalibratedModel(base, _multical(), feature_columns=FEATURES).fit(
        df[2000:4000], y[2000:4000])
    return model, df, y


def test_feature_columns_are_read_from_the_frame(fitted):
    model, df, y = fitted
    cal = model.calibrator_
    assert isinstance(cal, mlcal.Multicalibration) and cal.n_iter_ > 0
    assert cal.map_.feature_names == FEATURES
    assert [f.kind for f in cal.map_.features] == ["score", "categorical", "numeric",
                                                   "categorical"]
    # the same as composing the parts by hand
    base = model.base_estimator
    direct = _multical().fit(base.predict_proba(df[["a", "b"]][2000:4000])[:, 1],
                             y[2000:4000], df[FEATURES][2000:4000])
    assert direct.to_json() == cal.to_json()
    test = df[4000:]
    expected = direct.predict(base.predict_proba(test[["a", "b"]])[:, 1], test[FEATURES])
    assert np.array_equal(model.predict_proba(test)[:, 1], expected)
    # the frame's column order does not matter
    assert np.array_equal(model.predict_proba(test[test.columns[::-1]])[:, 1], expected)
    # the features matter: the map moves the base probabilities by region
    assert np.abs(expected - model.predict_uncalibrated(test)).max() > 0.05
    with pytest.raises(ValueError, match=r"X has no feature column\(s\) \['age'\]"):
        model.predict_proba(test.drop(columns="age"))


def test_multicalibration_by_name_and_without_features(tmp_path):
    df, y = _data(seed=1, n=3000)
    base = LogisticRegression().fit(df[["a", "b"]][:1000], y[:1000])
    named = mlcal.CalibratedModel(base, "multicalibration", feature_columns=["region"]).fit(
        df[1000:2000], y[1000:2000])
    assert named.calibrator_.get_params() == mlcal.Multicalibration().get_params()
    # no feature columns: corrections along the score only; the base gets every column
    base_all = LogisticRegression().fit(df[["a", "b"]].to_numpy()[:1000], y[:1000])
    plain = mlcal.CalibratedModel(base_all, _multical()).fit(
        df[["a", "b"]].to_numpy()[1000:2000], y[1000:2000])
    assert plain.calibrator_.map_.feature_names == []
    s = base_all.predict_proba(df[["a", "b"]].to_numpy()[2000:])[:, 1]
    assert np.array_equal(plain.predict_proba(df[["a", "b"]].to_numpy()[2000:])[:, 1],
                          plain.calibrator_.predict(s))
    # saved and served like any score-only model (no feature columns in MLmodel)
    path = str(tmp_path / "plain")
    save_model(plain, path, input_example=df[["a", "b"]].to_numpy()[:3], pip_requirements=REQS)
    assert mlflow.models.Model.load(path).flavors["mlcal"]["feature_columns"] == []
    loaded = load_model(path)
    assert loaded.feature_columns is None and loaded._multicalibrated
    rows = df[["a", "b"]].to_numpy()[2000:]
    out = mlflow.pyfunc.load_model(path).predict(rows)
    assert np.array_equal(out["p_calibrated"].to_numpy(), plain.predict_proba(rows)[:, 1])


def test_feature_columns_errors_are_named(fitted):
    from sklearn.svm import LinearSVC

    model, df, y = fitted
    base = model.base_estimator
    rows, labels = df[2000:3000], y[2000:3000]
    with pytest.raises(FeatureColumnsError, match="does not read them"):
        mlcal.CalibratedModel(base, "platt", feature_columns=["region"]).fit(rows, labels)
    with pytest.raises(FeatureColumnsError, match="does not read them"):
        mlcal.CalibratedModel(base, mlcal.SegmentedCalibrator("platt"),
                              feature_columns=["region"]).fit(rows, labels)
    with pytest.raises(FeatureColumnsError, match="not segment_columns"):
        mlcal.CalibratedModel(base, _multical(), segment_columns=["region"]).fit(rows, labels)
    with pytest.raises(FeatureColumnsError, match="not both"):
        mlcal.CalibratedModel(base, _multical(), segment_columns=["region"],
                              feature_columns=["age"]).fit(rows, labels)
    with pytest.raises(ValueError, match=r"X has no feature column\(s\) \['height'\]"):
        mlcal.CalibratedModel(base, _multical(), feature_columns=["height"]).fit(rows, labels)
    with pytest.raises(ValueError, match="feature_columns must be a non-empty list"):
        mlcal.CalibratedModel(base, _multical(), feature_columns=[]).fit(rows, labels)
    with pytest.raises(Exception, match="X must be a pandas DataFrame"):
        model.predict_proba(df.to_numpy())
    # a numeric feature holding text is named
    bad = df[4000:4010].astype({"age": object})
    bad.loc[bad.index[0], "age"] = "old"
    with pytest.raises(ValueError, match="numeric feature 'age' is not numeric"):
        model.predict_proba(bad)
    # multicalibration reads probabilities: a decision-function base is refused by name
    svc = LinearSVC().fit(df[["a", "b"]][:1000], y[:1000])
    with pytest.raises(FeatureColumnsError, match="score source is 'decision_function'"):
        mlcal.CalibratedModel(svc, _multical(), feature_columns=["region"]).fit(rows, labels)
    # binary only
    y3 = np.arange(3000) % 3
    base3 = LogisticRegression().fit(df[["a", "b"]][:3000], y3)
    with pytest.raises(FeatureColumnsError, match="binary models only; this base model has 3"):
        mlcal.CalibratedModel(base3, _multical(), feature_columns=["region"]).fit(
            df[:3000], y3)


def test_mlflow_round_trip_keeps_the_feature_columns(fitted, tmp_path):
    model, df, _ = fitted
    path = tmp_path / "saved"
    save_model(model, str(path), input_example=df[:5], pip_requirements=REQS)
    mlmodel = mlflow.models.Model.load(str(path))
    sig = {spec.name: spec.type.name for spec in mlmodel.signature.inputs.inputs}
    assert sig["region"] == "string" and sig["age"] == "double" and sig["member"] == "boolean"
    conf = mlmodel.flavors["mlcal"]
    assert conf["feature_columns"] == FEATURES and "segment_columns" not in conf
    assert conf["calibration_method"] == "multicalibration"
    assert conf["map_type"] == "multicalibration"
    doc = json.loads((path / "calibrator.json").read_text())   # JSON, not pickle
    assert doc["method"] == "multicalibration" and doc["map"]["type"] == "multicalibration"
    loaded = load_model(str(path))
    assert loaded.feature_columns == FEATURES
    test = df[4000:]
    assert np.array_equal(loaded.predict_proba(test), model.predict_proba(test))
    pyfunc = mlflow.pyfunc.load_model(str(path))
    out = pyfunc.predict(test)
    assert np.array_equal(out["p_calibrated"].to_numpy(), model.predict_proba(test)[:, 1])
    assert np.array_equal(out["label"].to_numpy(), model.predict(test))
    # an edited map (one leaf value) is refused by the integrity check
    doc["map"]["trees"][0]["value"][-1] += 1.0
    (path / "calibrator.json").write_text(json.dumps(doc))
    with pytest.raises(ModelIntegrityError, match="calibrator.json was changed"):
        load_model(str(path))


def test_an_inconsistent_artifact_is_refused_even_with_fresh_digests(fitted, tmp_path):
    """MLmodel's feature_columns must repeat the map's features: rewrite one and reseal the
    directory (as an attacker with write access could), and loading still refuses it."""
    import yaml

    from mlcal.calibrators.base import CalibratorFormatError
    from mlcal.mlflow.integrity import seal

    model, df, _ = fitted
    path = tmp_path / "saved"
    save_model(model, str(path), input_example=df[:5], pip_requirements=REQS)
    mlmodel = path / "MLmodel"
    doc = yaml.safe_load(mlmodel.read_text())
    doc["flavors"]["mlcal"]["feature_columns"] = ["region", "age"]
    mlmodel.write_text(yaml.safe_dump(doc))
    flavors = yaml.safe_load(mlmodel.read_text())["flavors"]
    seal(str(path), flavors)
    doc["flavors"] = flavors
    mlmodel.write_text(yaml.safe_dump(doc))
    with pytest.raises(CalibratorFormatError, match="reads feature columns .* but the MLmodel "
                                                    "file says"):
        load_model(str(path))


def test_a_signature_without_or_mistyping_a_feature_column_is_refused(fitted, tmp_path):
    model, df, _ = fitted
    with pytest.raises(ValueError, match="signature has no feature column 'age'"):
        save_model(model, str(tmp_path / "m"), input_example=df.drop(columns="age")[:5],
                   pip_requirements=REQS)
    assert not (tmp_path / "m").exists()
    with pytest.raises(ValueError, match="feature column 'age' is numeric but the signature "
                                         "types it 'string'"):
        save_model(model, str(tmp_path / "m"), input_example=df.astype({"age": str})[:5],
                   pip_requirements=REQS)
    assert not (tmp_path / "m").exists()


@pytest.fixture(scope="module")
def served(fitted, tmp_path_factory):
    from support.serving import LocalServer

    model, df, _ = fitted
    root = tmp_path_factory.mktemp("serve_multicalibration")
    path = root / "model"
    save_model(model, str(path), input_example=df[:3], pip_requirements=REQS)
    server = LocalServer(str(path), log_path=str(root / "server.log")).start()
    try:
        yield server.url
    finally:
        server.stop()


def test_served_predictions_read_the_feature_columns(fitted, served):
    from support.http import post

    model, df, _ = fitted
    rows = df[4000:4300].copy()
    rows.loc[rows.index[:5], "region"] = "atlantis"   # unseen category: the "other" code
    body = {"dataframe_split": {"columns": list(rows.columns),
                                "data": rows.astype(object).to_numpy().tolist()}}
    status, text = post(f"{served}/invocations", json.dumps(body))
    assert status == 200, text
    got = pd.DataFrame(json.loads(text)["predictions"])
    local = model.predict_proba(rows)[:, 1]
    assert np.array_equal(got["p_calibrated"].to_numpy().view(np.int64), local.view(np.int64))
    assert np.array_equal(got["label"].to_numpy(), model.predict(rows))
    # records and the uncalibrated score too
    status, text = post(f"{served}/invocations", json.dumps(
        {"dataframe_records": rows[:20].to_dict(orient="records"),
         "params": {"return_uncalibrated": True}}))
    assert status == 200, text
    got = pd.DataFrame(json.loads(text)["predictions"])
    assert np.array_equal(got["p_calibrated"].to_numpy(), local[:20])
    assert np.array_equal(got["score_uncalibrated"].to_numpy(),
                          model.predict_uncalibrated(rows[:20]))
    # a request without a feature column is the caller's error (400)
    status, text = post(f"{served}/invocations", json.dumps(
        {"dataframe_records": rows.drop(columns="age")[:2].to_dict(orient="records")}))
    assert status == 400 and "age" in text, text


# -- ONNX, fused with the base model ---------------------------------------------------------
def _base_scores_in_onnx(model, feeds_frame):
    """The base model's score as its own converted graph computes it (the same nodes, so the
    same bits, as inside the fused graph)."""
    import onnxruntime as ort

    from mlcal.onnx import input_feeds
    from mlcal.onnx._compose import convert_base

    from sklearn.pipeline import Pipeline

    base_X = model._split_columns(feeds_frame)[0]
    per_column = isinstance(model.base_estimator, Pipeline)   # the ColumnTransformer case
    onx = convert_base(model.base_estimator, model.score_source_, np.dtype(np.float64), 17,
                       X=base_X[:5] if per_column else None)
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = input_feeds(onx, base_X)
    return sess.run(None, feeds)[1][:, -1].astype(np.float64)


@pytest.mark.parametrize("case", ["named", "named-with-feature", "array",
                                  "pipeline-per-column", "xgboost"])
def test_onnx_fused_with_the_base_model(case):
    """The base model's graph feeds the multicalibration trees: feature columns are extra
    [N, 1] inputs (or the base model's own per-column input where it reads the column: 'age'
    is a base feature and a multicalibration feature). Routing is exact on the graph's own
    base score; probabilities are within the standalone export's derived bound of Python's
    map on that score, and within 1e-9 of model.predict_proba end to end."""
    import onnxruntime as ort
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from mlcal.multicalibration._trees import LEAF
    from mlcal.multicalibration.onnx_export import error_bound
    from mlcal.onnx import input_feeds, to_onnx

    df, y = _data(seed=7, n=5000)
    features = FEATURES
    if case == "array":
        base = LogisticRegression().fit(df[["a", "b"]].to_numpy()[:1500], y[:1500])
        frame = df[["a", "b", *features]]
    elif case == "pipeline-per-column":
        base = make_pipeline(ColumnTransformer([("num", StandardScaler(), ["a", "b", "age"])]),
                             LogisticRegression()).fit(df[["a", "b", "age"]][:1500], y[:1500])
        frame = df
    elif case == "xgboost":   # float32 trees; onnxmltools' converter (unnamed columns only)
        xgb = pytest.importorskip("xgboost")
        pytest.importorskip("onnxmltools")
        base = xgb.XGBClassifier(n_estimators=30, max_depth=3).fit(
            df[["a", "b"]].to_numpy()[:1500], y[:1500])
        frame = df[["a", "b", *features]]
    else:
        cols = ["a", "b"] if case == "named" else ["a", "b", "age"]
        base = LogisticRegression().fit(df[cols][:1500], y[:1500])
        frame = df
    model = mlcal.CalibratedModel(base, _multical(), feature_columns=features).fit(
        frame[1500:3500], y[1500:3500])
    assert len(model.calibrator_.map_.trees) > 5
    test = frame[3500:].copy()
    test.loc[test.index[::11], "region"] = "atlantis"   # unseen category
    import warnings

    from mlcal.multicalibration.onnx_export import BaseScoreRoundingWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(model, X=test[:5] if case == "pipeline-per-column" else None)
    rounding = [w for w in caught if issubclass(w.category, BaseScoreRoundingWarning)]
    assert len(rounding) == (1 if case == "xgboost" else 0)
    names = [i.name for i in onx.graph.input]
    if case == "pipeline-per-column":
        assert names == ["a", "b", "age", "region", "member"]
    else:
        assert names == ["X", *features]
    assert [o.name for o in onx.graph.output] == ["label", "probabilities", "tree_leaves"]
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    label, proba, leaves = sess.run(None, input_feeds(onx, test))
    # routing: exactly Python's on the graph's own base score
    s_onnx = _base_scores_in_onnx(model, test)
    m = model.calibrator_.map_
    x = m.feature_matrix(s_onnx, test[features])
    for t, tree in enumerate(m.trees):
        node = np.zeros(len(test), dtype=np.int64)
        for _ in range(tree.n_nodes):
            f = tree.feature[node]
            inner = f != LEAF
            if not inner.any():
                break
            xv = x[np.arange(len(test)), np.where(inner, f, 0)]
            go_left = np.array([
                (xv[i] <= tree.threshold[node[i]]) if m.features[f[i]].kind != "categorical"
                else (int(xv[i]) in tree.category_set[node[i]]) if inner[i] else False
                for i in range(len(test))])
            node = np.where(inner, np.where(go_left, tree.left[node], tree.right[node]), node)
        assert np.array_equal(leaves[:, t], node), t
    # probabilities: the standalone export's per-row bound, on the same score
    expected = m(s_onnx, test[features])
    err = np.abs(proba[:, 1] - expected)
    bound = error_bound(m, s_onnx, test[features])
    assert (err <= bound).all(), (err.max(), bound.min())
    # end to end against Python: the base graph rounds its score its own way. XGBoost's
    # float32 score differs from the library's by a float32 rounding on some rows, and its
    # scores are piecewise constant, so some rows' Python score *is* a score threshold:
    # exactly the rows whose two scores straddle a score threshold may route differently
    local = model.predict_proba(test)
    s_py = model.predict_uncalibrated(test)
    thr = np.unique(np.concatenate([t.threshold[t.feature == 0] for t in m.trees]))
    lo, hi = np.minimum(s_py, s_onnx), np.maximum(s_py, s_onnx)
    straddle = np.array([((a <= thr) & (thr < b)).any() for a, b in zip(lo, hi)])
    tol = 1e-6 if case == "xgboost" else 1e-9
    off = np.abs(proba[:, 1] - local[:, 1]) >= tol
    assert not (off & ~straddle).any()
    if case != "xgboost":
        assert not straddle.any() and not off.any()
    clear = ~off & (np.abs(local[:, 1] - model.threshold) > tol)   # labels away from the bits
    assert clear.mean() > 0.97
    assert np.array_equal(label[clear], model.predict(test)[clear])
    print(case, "max error", err.max(), "bound", bound.min(), bound.max(),
          "end-to-end (rows not straddling)", np.abs(proba - local)[~straddle].max(),
          "rows whose base score differs", int((s_py != s_onnx).sum()), "straddling",
          int(straddle.sum()), "routed differently", int(off.sum()), "of", len(test),
          "largest difference", np.abs(proba - local).max())


def test_onnx_of_a_multicalibrated_model_refuses_float32(fitted):
    from mlcal.onnx import to_onnx

    model, _, _ = fitted
    with pytest.raises(ValueError, match="float64 graph only"):
        to_onnx(model, dtype="float32")


# -- calibrate_and_log, the gate, the monitor loop -------------------------------------------
def test_calibrate_and_log_then_the_gate_promotes_a_multicalibrated_model(sqlite_tracking,
                                                                         tmp_path):
    """A base model blind to the region, calibrated globally (Platt) and by multicalibration
    over the region and age: calibrate_and_log logs both (held-out metrics from
    predict_calibrated, the segment report by region); the gate refuses the global model on
    the worst region's calibration and promotes the multicalibrated one, recomputing its
    probabilities through the registered artifact."""
    from sklearn.metrics import log_loss

    from mlcal.holdout import holdout_split
    from mlcal.mlflow import calibrate_and_log
    from mlcal.mlflow.gate import promote

    name = "multical_gate"
    df, y = _data(n=9000, seed=11)
    df = df[["a", "b", "region"]]
    base = LogisticRegression().fit(df[["a", "b"]][:2000], y[:2000])
    Xc, yc = df[2000:6000].reset_index(drop=True), y[2000:6000]
    common = dict(registered_model_name=name, pip_requirements=REQS, bundle_mlcal=False)
    # the global model reads a and b; the region is given as the report's segments only (its
    # HTML report is not read here: test_segment_logging renders one of a segmented run)
    glob = calibrate_and_log(base, Xc[["a", "b"]], yc, calibrator="platt",
                             segments=Xc["region"], html_report=False, **common)
    multi = calibrate_and_log(base, Xc, yc, calibrator=_multical(), segment_columns=["region"],
                              model_feature_columns=["region"], **common)
    model = multi.model
    assert model._multicalibrated and model.feature_columns == ["region"]
    _, held = holdout_split(yc, 0.25, 0)
    p = model.predict_proba(Xc.iloc[held])[:, 1]
    assert multi.report["after"]["log_loss"] == pytest.approx(log_loss(yc[held], p),
                                                              rel=1e-9)
    assert multi.report["calibrator"]["method"] == "multicalibration"
    assert max(multi.report["segments"]["worst"]["citl_excess"], 0.0) < \
        glob.report["segments"]["worst"]["citl_excess"]
    assert mlflow.MlflowClient().get_run(multi.run_id).data.params[
        "mlcal.method"] == "multicalibration"
    loaded = load_model(multi.model_uri)
    assert np.array_equal(loaded.predict_proba(Xc), model.predict_proba(Xc))

    holdout = df[6000:].reset_index(drop=True)
    holdout["y"] = y[6000:]
    gate = dict(max_ece=0.05, data=holdout, max_segment_citl=0.03, segment_columns=["region"],
                min_segment_rows=100, report=False)
    # (the region is not an input of version 1's signature: the gate does not pass it)
    d = promote(name, "1", **gate)
    assert not d.promoted
    assert [c.name for c in d.criteria if c.passed is False] == ["segment_citl"], d.explain()
    d = promote(name, "2", **gate)
    assert d.promoted, d.explain()
    # the gate scored the registered artifact exactly as the model in memory
    from mlcal.metrics import segment_report

    worst = d.as_dict()["segments"]["worst"]
    ref = segment_report(holdout["y"].to_numpy(),
                         model.predict_proba(holdout.drop(columns="y"))[:, 1],
                         holdout["region"], min_segment_rows=100, simultaneous=True)
    assert worst["label"] == ref.worst["label"]
    assert worst["citl"] == pytest.approx(ref.worst["citl"], abs=1e-12)

    # the calibration evaluator plugin scores it with the frame's feature columns
    from sklearn.metrics import log_loss as sk_log_loss

    from mlcal.metrics import ece

    p_hold = model.predict_proba(holdout.drop(columns="y"))[:, 1]
    with mlflow.start_run() as ev_run:
        mlflow.models.evaluate(f"models:/{name}/2", holdout, targets="y",
                               model_type="classifier", evaluators=["calibration"])
    got = mlflow.MlflowClient().get_run(ev_run.info.run_id).data.metrics
    assert got["calibration_ece"] == pytest.approx(ece(holdout["y"], p_hold), abs=1e-12)
    assert got["calibration_log_loss"] == pytest.approx(sk_log_loss(holdout["y"], p_hold),
                                                        rel=1e-9)

    # the monitoring loop refuses it by name (its window keeps no feature corrections)
    from mlcal.monitor.loop import MulticalibratedModelNotMonitoredError, run_batch

    with pytest.raises(MulticalibratedModelNotMonitoredError,
                       match=r"multicalibrated .*\['region'\]"):
        run_batch(state_path=str(tmp_path / "STATE.json"), model_uri=f"models:/{name}@champion",
                  frame=holdout, label_column="y")
    assert not (tmp_path / "STATE.json").exists()


def test_reoffset_refuses_a_multicalibrated_model_by_name(fitted):
    from mlcal.maps.reoffset import reoffset

    model, df, y = fitted
    with pytest.raises(ValueError, match="multicalibrated models .* are not supported"):
        reoffset(model, delta=0.1)
