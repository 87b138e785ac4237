"""The mlcal MLflow flavour, pyfunc and run logging for multiclass (K >= 3) models, against a
real sqlite tracking store in a temp dir (no mocks)."""

import json
import os

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow.exceptions import MlflowException
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from mlcal.calibrators.base import CalibratorFormatError
from mlcal.calibrators.multiclass import MissingClassError, TooFewClassesError
from mlcal.labels import MissingLabelError, UnknownLabelError
from mlcal.mlflow import (calibrate_and_log, load_model, log_calibration, log_model,
                          probability_columns, save_model)
from mlcal.mlflow.integrity import ModelIntegrityError
from mlcal.model import CalibratedModel
from support.mlflow_store import sqlite_store
from support.tamper import reseal
from mlcal.metrics.multiclass import (classwise_ece, multiclass_brier, multiclass_log_loss,
                                      top_label_ece)

FAST_REQS = ["scikit-learn", "numpy", "pandas"]  # explicit: skips slow requirement inference
NAMES = np.array(["ant", "bee", "cat", "dog"])


def _frame(X):
    return pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(2400, n_features=6, n_informative=4, n_redundant=0,
                               n_classes=4, n_clusters_per_class=1, random_state=3)
    df = _frame(X)
    labels = NAMES[y]                       # string classes
    base = LogisticRegression(C=0.02).fit(df[:800], labels[:800])   # under-confident
    model = CalibratedModel(base, "temperature").fit(df[800:1600], labels[800:1600])
    forest = RandomForestClassifier(30, max_depth=5, random_state=0).fit(df[:800], y[:800])
    ovr = CalibratedModel(forest, "isotonic").fit(df[800:1600], y[800:1600])   # int classes
    return {"df": df, "y": y, "labels": labels, "base": base, "model": model,
            "forest": forest, "ovr": ovr, "X_cal": df[800:1600], "X_test": df[1600:],
            "y_test": labels[1600:], "yi_test": y[1600:]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow_mc_store")
    with sqlite_store(root, "mlcal-multiclass"):
        yield root


@pytest.fixture(scope="module")
def saved(data, tmp_path_factory):
    root = tmp_path_factory.mktemp("mc_saved")
    paths = {}
    for key in ("model", "ovr"):
        paths[key] = str(root / key)
        save_model(data[key], paths[key], input_example=data["X_test"][:3],
                   pip_requirements=FAST_REQS)
    return paths


def test_probability_columns_are_named_by_class_and_refuse_collisions():
    assert probability_columns(np.array(["a", "b", "c"])) == ["proba_a", "proba_b", "proba_c"]
    assert probability_columns(np.array([3, 1, 2])) == ["proba_3", "proba_1", "proba_2"]
    with pytest.raises(ValueError, match="duplicate output columns.*proba_1"):
        probability_columns(np.array([1, "1", 2], dtype=object))


@pytest.mark.parametrize("key", ["model", "ovr"])
def test_save_load_round_trip_is_exact(data, saved, key):
    model = data[key]
    loaded = load_model(saved[key])
    assert loaded.classes_.tolist() == model.classes_.tolist()
    assert loaded.classes_.dtype.kind == model.classes_.dtype.kind   # str stays str, int int
    assert loaded.calibrator_.map_ == model.calibrator_.map_
    np.testing.assert_array_equal(loaded.predict_proba(data["X_test"]),
                                  model.predict_proba(data["X_test"]))
    np.testing.assert_array_equal(loaded.predict(data["X_test"]), model.predict(data["X_test"]))
    with open(os.path.join(saved[key], "MLmodel")) as fh:
        conf = yaml.safe_load(fh)["flavors"]["mlcal"]
    assert conf["calibration_method"] == model.calibrator_.document_method
    assert conf["classes"] == model.classes_.tolist()
    with open(os.path.join(saved[key], conf["calibrator"])) as fh:
        assert json.load(fh)["method"] == model.calibrator_.document_method


@pytest.mark.parametrize("key", ["model", "ovr"])
def test_pyfunc_has_one_column_per_class_plus_label(data, saved, key):
    model, X = data[key], data["X_test"]
    pf = mlflow.pyfunc.load_model(saved[key])
    out = pf.predict(X)
    cols = [f"proba_{c}" for c in model.classes_.tolist()]
    assert list(out.columns) == cols + ["label"]
    p = model.predict_proba(X)
    np.testing.assert_array_equal(out[cols].to_numpy(), p)   # exact, not approximately
    assert np.all(np.abs(out[cols].to_numpy().sum(axis=1) - 1.0) <= 1e-12)
    assert out["label"].tolist() == model.classes_[np.argmax(p, axis=1)].tolist()
    assert out["label"].tolist() == model.predict(X).tolist()
    raw = pf.predict(X, params={"return_uncalibrated": True})
    raw_cols = [f"score_uncalibrated_{c}" for c in model.classes_.tolist()]
    assert list(raw.columns) == cols + ["label"] + raw_cols
    np.testing.assert_array_equal(raw[raw_cols].to_numpy(), model.base_estimator.predict_proba(X))
    sig = pf.metadata.signature
    assert sig.outputs.input_names() == cols + ["label"] + raw_cols
    label_type = "string" if key == "model" else "long"
    assert [c.type.name for c in sig.outputs.inputs if c.name == "label"] == [label_type]


def test_model_config_outputs_keep_working(data, saved):
    X = data["X_test"]
    model = data["model"]
    label = mlflow.pyfunc.load_model(saved["model"], model_config={"output": "label"})
    got = label.predict(X)
    assert isinstance(got, pd.Series) and got.tolist() == model.predict(X).tolist()
    bee = mlflow.pyfunc.load_model(saved["model"], model_config={"output": "proba_bee"})
    np.testing.assert_array_equal(bee.predict(X).to_numpy(), model.predict_proba(X)[:, 1])
    with pytest.raises(ValueError, match="must be one of.*proba_ant"):
        mlflow.pyfunc.load_model(saved["model"], model_config={"output": "p_calibrated"})


def test_pyfunc_refuses_bad_rows_with_the_reason(data, saved):
    pf = mlflow.pyfunc.load_model(saved["model"])
    bad = data["X_test"][:3].copy()
    bad.iloc[1, 2] = np.nan
    with pytest.raises(MlflowException, match="mlcal model: .*NaN"):
        pf.predict(bad)


def test_inconsistent_artifact_is_refused(data, saved, tmp_path):
    import shutil

    copy = tmp_path / "m"
    shutil.copytree(saved["model"], copy)
    with open(copy / "MLmodel") as fh:
        mlmodel = yaml.safe_load(fh)
    mlmodel["flavors"]["mlcal"]["classes"] = ["ant", "bee", "cat"]   # one class fewer
    with open(copy / "MLmodel", "w") as fh:
        yaml.safe_dump(mlmodel, fh)
    with pytest.raises(ModelIntegrityError, match="MLmodel flavour sections were edited"):
        load_model(str(copy))
    reseal(copy)   # with the digests recomputed, the consistency check behind them refuses it
    with pytest.raises(CalibratorFormatError, match="4 classes but the MLmodel file lists 3"):
        load_model(str(copy))


def test_boosted_multiclass_base_round_trips(data, tmp_path):
    xgb = pytest.importorskip("xgboost")
    df, y = data["df"], data["y"]
    base = xgb.XGBClassifier(n_estimators=30, max_depth=3, random_state=0).fit(df[:800], y[:800])
    model = CalibratedModel(base, "vector", score="margin").fit(df[800:1600], y[800:1600])
    path = str(tmp_path / "xgb")
    save_model(model, path, input_example=df[:3], pip_requirements=FAST_REQS + ["xgboost"])
    with open(os.path.join(path, "MLmodel")) as fh:
        assert yaml.safe_load(fh)["flavors"]["mlcal"]["base_flavor"] == "xgboost"
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict_proba(df[1600:]), model.predict_proba(df[1600:]))
    out = mlflow.pyfunc.load_model(path).predict(df[1600:])
    np.testing.assert_array_equal(out[["proba_0", "proba_1", "proba_2", "proba_3"]].to_numpy(),
                                  model.predict_proba(df[1600:]))


def test_log_model_and_registry_uri(data, store):
    with mlflow.start_run():
        info = log_model(data["model"], name="mc", input_example=data["X_test"][:3],
                         pip_requirements=FAST_REQS, registered_model_name="mc-flavour")
    loaded = load_model("models:/mc-flavour/1")
    np.testing.assert_array_equal(loaded.predict_proba(data["X_test"]),
                                  data["model"].predict_proba(data["X_test"]))
    assert info.signature.outputs.input_names()[:4] == ["proba_ant", "proba_bee", "proba_cat",
                                                        "proba_dog"]


# -- run logging ------------------------------------------------------------------------------
def _one_hot(yi, K):
    return (np.asarray(yi)[:, None] == np.arange(K)[None, :]).astype(float)


@pytest.fixture(scope="module")
def logged_run(data, store):
    df, labels = data["df"], data["labels"]
    run = calibrate_and_log(data["base"], df[800:1600], labels[800:1600], calibrator="vector",
                            X_eval=df[1600:], y_eval=labels[1600:], name="mc",
                            pip_requirements=FAST_REQS, run_name="mc-run")
    return run


def test_calibrate_and_log_logs_multiclass_metrics_against_sklearn(data, logged_run):
    from sklearn.metrics import brier_score_loss

    client = mlflow.MlflowClient()
    metrics = client.get_run(logged_run.run_id).data.metrics
    X, y = data["X_test"], data["y_test"]
    model = logged_run.model
    classes = model.classes_.tolist()
    yi = np.array([classes.index(v) for v in y])
    p_after = model.predict_proba(X)
    p_before = data["base"].predict_proba(X)
    for part, p in (("before", p_before), ("after", p_after)):
        assert metrics[f"log_loss_{part}"] == pytest.approx(log_loss(y, p, labels=classes),
                                                            abs=1e-12)
        brier = np.mean(np.sum((p - _one_hot(yi, 4)) ** 2, axis=1))
        assert metrics[f"multiclass_brier_{part}"] == pytest.approx(brier, abs=1e-12)
        # scikit-learn's multiclass Brier is the same sum over classes (scale_by_half=False)
        assert metrics[f"multiclass_brier_{part}"] == pytest.approx(
            brier_score_loss(y, p, labels=classes, scale_by_half=False), abs=1e-12)
        assert metrics[f"accuracy_{part}"] == pytest.approx(
            np.mean(np.array(classes)[p.argmax(1)] == y), abs=1e-15)
        assert metrics[f"top_label_ece_{part}"] == pytest.approx(top_label_ece(yi, p, 10),
                                                                 abs=1e-12)
        assert metrics[f"classwise_ece_{part}"] == pytest.approx(classwise_ece(yi, p, 10),
                                                                 abs=1e-12)
    assert metrics["log_loss_improvement"] == pytest.approx(
        metrics["log_loss_before"] - metrics["log_loss_after"], abs=1e-12)
    assert metrics["log_loss_after"] < metrics["log_loss_before"]   # C=0.02 is under-confident
    assert "ece_after" not in metrics and "brier_after" not in metrics   # binary names unused
    params = client.get_run(logged_run.run_id).data.params
    assert params["mlcal.method"] == "multiclass-vector"
    assert params["mlcal.n_evaluation"] == str(len(y))


def test_calibrate_and_log_writes_per_class_diagrams_and_report(logged_run, tmp_path):
    client = mlflow.MlflowClient()
    files = {os.path.basename(f.path) for f in client.list_artifacts(logged_run.run_id,
                                                                      "calibration")}
    assert files == {"reliability_multiclass.png", "calibration_report.json",
                     "reliability_corp.png", "calibration_report.html"}
    local = mlflow.artifacts.download_artifacts(
        run_id=logged_run.run_id, artifact_path="calibration/calibration_report.json",
        dst_path=str(tmp_path))
    with open(local) as fh:
        report = json.load(fh)
    assert [c["class"] for c in report["per_class"]] == NAMES.tolist()
    assert sum(c["count"] for c in report["per_class"]) == report["n"]
    assert report["calibrator"]["method"] == "multiclass-vector"
    loaded = load_model(logged_run.model_uri)
    X = _frame(np.random.default_rng(0).normal(size=(20, 6)))
    np.testing.assert_array_equal(loaded.predict_proba(X), logged_run.model.predict_proba(X))


def _n_runs():
    exp = mlflow.tracking.fluent._get_experiment_id()
    return len(mlflow.MlflowClient().search_runs([exp]))


@pytest.mark.parametrize("case", ["nan", "unknown", "absent"])
def test_bad_multiclass_labels_are_named_errors_and_log_nothing(data, store, case):
    df, labels = data["df"], data["labels"].astype(object)
    y_eval = labels[1600:].copy()
    X_eval = df[1600:]
    if case == "nan":
        y_eval[5] = np.nan
        err, match = MissingLabelError, "1 of 800 labels are missing"
    elif case == "unknown":
        y_eval[7] = "eel"
        err, match = UnknownLabelError, "'eel'"
    else:
        keep = y_eval != "dog"
        X_eval, y_eval = X_eval[keep], y_eval[keep]
        err, match = MissingClassError, r"\['dog'\].*never occur"
    before = _n_runs()
    with pytest.raises(err, match=match):
        calibrate_and_log(data["base"], df[800:1600], labels[800:1600], calibrator="temperature",
                          X_eval=X_eval, y_eval=y_eval, pip_requirements=FAST_REQS)
    assert _n_runs() == before


def test_one_class_and_non_probability_rows_are_named_errors(data, store):
    from sklearn.dummy import DummyClassifier

    from mlcal.calibrators.multiclass import NotProbabilitiesError

    df = data["df"]
    one = DummyClassifier().fit(df[:50], np.zeros(50))
    with pytest.raises(TooFewClassesError, match="1 class"):
        calibrate_and_log(one, df[800:900], np.zeros(100), pip_requirements=FAST_REQS)
    yi = data["yi_test"]
    p = data["model"].predict_proba(data["X_test"])
    with mlflow.start_run():
        with pytest.raises(NotProbabilitiesError, match="do not sum to 1"):
            log_calibration(yi, p * 0.9, p)
        with pytest.raises(TooFewClassesError, match="at least 3 classes"):
            log_calibration(["a", "b"] * 5, p[:10], p[:10], classes=["a", "b"])


def test_log_calibration_takes_labels_with_classes(data, store):
    p_before = data["base"].predict_proba(data["X_test"])
    p_after = data["model"].predict_proba(data["X_test"])
    with mlflow.start_run() as run:
        # (its diagrams and HTML report: test_calibrate_and_log_writes_per_class_diagrams_...)
        report = log_calibration(data["y_test"], p_before, p_after, classes=NAMES, prefix="x_",
                                 html_report=False)
    metrics = mlflow.MlflowClient().get_run(run.info.run_id).data.metrics
    assert metrics["x_log_loss_after"] == pytest.approx(
        log_loss(data["y_test"], p_after, labels=NAMES.tolist()), abs=1e-12)
    assert report["classes"] == NAMES.tolist()
    assert multiclass_log_loss(data["yi_test"], p_after) == pytest.approx(
        metrics["x_log_loss_after"], abs=0)
    assert multiclass_brier(data["yi_test"], p_after) == metrics["x_multiclass_brier_after"]
