"""The `calibration` MLflow evaluator plugin, installed from plugins/ (the README's test command
installs it), run through mlflow.models.evaluate on a real sqlite tracking store."""

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")

from sklearn.naive_bayes import GaussianNB  # noqa: E402

from mlcal import metrics  # noqa: E402
from mlcal.datasets import load_breast_cancer_binary  # noqa: E402
from support.evaluation import evaluate_calibrated  # noqa: E402


@pytest.fixture()
def store(sqlite_tracking):
    return sqlite_tracking


@pytest.fixture(scope="module")
def data():
    X, y, names = load_breast_cancer_binary()
    cols = [n.replace(" ", "_") for n in names]
    frame = pd.DataFrame(X, columns=cols)
    model = GaussianNB().fit(frame.iloc[:300], y[:300])
    test = frame.iloc[300:].copy()
    test["y"] = y[300:]
    return model, test


@pytest.fixture(scope="module")
def saved_model(data, tmp_path_factory):
    """The model saved once in the MLflow format (a local model URI) for the tests about the
    evaluation data; the tests above evaluate a model logged to their run."""
    path = tmp_path_factory.mktemp("nb") / "model"
    mlflow.sklearn.save_model(data[0], str(path), pip_requirements=["scikit-learn"])
    return str(path)


def test_plugin_is_registered():
    assert "calibration" in mlflow.models.list_evaluators()


def logged(run_id):
    return mlflow.MlflowClient().get_run(run_id).data.metrics


def test_sklearn_classifier_metrics_equal_mlcal_metrics(store, data):
    model, test = data
    with mlflow.start_run() as run:
        info = mlflow.sklearn.log_model(model, name="nb", pip_requirements=["scikit-learn"])
        result = mlflow.models.evaluate(info.model_uri, test, targets="y",
                                        model_type="classifier", evaluators=["calibration"])
    p = model.predict_proba(test.drop(columns=["y"]))[:, 1]
    expected = metrics.compute_all(test["y"].to_numpy(), p)
    got = logged(run.info.run_id)
    for name in ("ece", "mce", "brier", "log_loss", "auc", "accuracy"):
        assert got[f"calibration_{name}"] == pytest.approx(expected[name], abs=1e-12)
        assert result.metrics[f"calibration_{name}"] == pytest.approx(expected[name], abs=1e-12)
    arts = mlflow.MlflowClient().list_artifacts(run.info.run_id)
    assert {"calibration_reliability_diagram.png",
            "calibration_reliability_corp.png"} <= {a.path for a in arts}


def test_quantile_strategy_and_prefix_are_configurable(store, data):
    model, test = data
    with mlflow.start_run() as run:
        info = mlflow.sklearn.log_model(model, name="nb", pip_requirements=["scikit-learn"])
        mlflow.models.evaluate(info.model_uri, test, targets="y", model_type="classifier",
                               evaluators=["calibration"],
                               evaluator_config={"calibration": {"strategy": "quantile",
                                                                "metric_prefix": "cq_"}})
    p = model.predict_proba(test.drop(columns=["y"]))[:, 1]
    assert logged(run.info.run_id)["cq_ece"] == pytest.approx(
        metrics.ece(test["y"].to_numpy(), p, strategy="quantile"), abs=1e-12)


def test_mlcal_calibrated_model_metrics_equal_mlcal_metrics(store, data):
    model, test = data
    cal, holdout, run_id = evaluate_calibrated(model, test, "isotonic", 120, ["mlcal"])
    p = cal.predict_proba(holdout.drop(columns=["y"]))[:, 1]
    expected = metrics.compute_all(holdout["y"].to_numpy(), p)
    got = logged(run_id)
    for name in ("ece", "mce", "brier", "log_loss"):
        assert got[f"calibration_{name}"] == pytest.approx(expected[name], abs=1e-12)


def test_diagnostics_are_logged(store, data):
    model, test = data
    with mlflow.start_run() as run:
        info = mlflow.sklearn.log_model(model, name="nb", pip_requirements=["scikit-learn"])
        mlflow.models.evaluate(info.model_uri, test, targets="y", model_type="classifier",
                               evaluators=["calibration"])
    p = model.predict_proba(test.drop(columns=["y"]))[:, 1]
    y = test["y"].to_numpy()
    got = logged(run.info.run_id)
    assert got["calibration_debiased_ece"] == pytest.approx(metrics.debiased_ece(y, p), abs=1e-12)
    assert got["calibration_smooth_ece"] == pytest.approx(metrics.smooth_ece(y, p), abs=1e-12)
    assert got["calibration_spiegelhalter_z"] == pytest.approx(metrics.spiegelhalter_z(y, p)[0])


@pytest.mark.parametrize("kind,message", [
    ("all NaN", "missing"), ("5% NaN", "missing"), ("unknown strings", "not among"),
    ("single class", "negative class"), ("too few rows", "minimum")])
def test_bad_labels_are_refused_with_a_clear_error(store, data, saved_model, kind, message):
    model, test = data
    t = test.copy()
    if kind == "all NaN":
        t["y"] = np.nan
    elif kind == "5% NaN":
        t["y"] = t["y"].astype(float)
        t.loc[t.index[::20], "y"] = np.nan
    elif kind == "unknown strings":
        t["y"] = np.where(t["y"] == 1, "yes", "no")
    elif kind == "single class":
        t = t[t["y"] == 0]
    else:
        t = t.iloc[:50]
    with mlflow.start_run() as run:
        with pytest.raises(Exception, match=message):
            mlflow.models.evaluate(saved_model, t, targets="y", model_type="classifier",
                                   evaluators=["calibration"])
    assert not any(k.startswith("calibration_") for k in logged(run.info.run_id))
