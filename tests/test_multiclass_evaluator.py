"""The `calibration` evaluator plugin on multiclass models, through mlflow.models.evaluate on a
real sqlite tracking store: metrics equal to scikit-learn's / mlcal's, per-class diagrams."""

import numpy as np
import pytest

mlflow = pytest.importorskip("mlflow")

from sklearn.datasets import load_wine  # noqa: E402
from sklearn.metrics import log_loss  # noqa: E402
from sklearn.naive_bayes import GaussianNB  # noqa: E402

from mlcal.calibrators.multiclass import MissingClassError  # noqa: E402
from mlcal.labels import MissingLabelError, UnknownLabelError  # noqa: E402
from mlcal.metrics.multiclass import classwise_ece, top_label_ece  # noqa: E402
from support.evaluation import evaluate_calibrated  # noqa: E402

NAMES = np.array(["barolo", "grignolino", "barbera"])


@pytest.fixture()
def store(sqlite_tracking):
    return sqlite_tracking


@pytest.fixture(scope="module")
def data():
    X, y = load_wine(return_X_y=True, as_frame=True)
    order = np.random.default_rng(4).permutation(len(y))
    X, y = X.iloc[order].reset_index(drop=True), NAMES[y.to_numpy()[order]]
    model = GaussianNB().fit(X.iloc[:60], y[:60])
    test = X.iloc[60:].copy()
    test["y"] = y[60:]
    return model, test


def _check_metrics(run_id, model_probs, test, classes):
    got = mlflow.MlflowClient().get_run(run_id).data.metrics
    y = test["y"].to_numpy()
    yi = np.array([list(classes).index(v) for v in y])
    onehot = (yi[:, None] == np.arange(len(classes))).astype(float)
    assert got["calibration_log_loss"] == pytest.approx(
        log_loss(y, model_probs, labels=list(classes)), abs=1e-12)
    assert got["calibration_multiclass_brier"] == pytest.approx(
        np.mean(np.sum((model_probs - onehot) ** 2, axis=1)), abs=1e-12)
    assert got["calibration_accuracy"] == pytest.approx(
        np.mean(np.asarray(classes)[model_probs.argmax(1)] == y), abs=1e-15)
    assert got["calibration_top_label_ece"] == pytest.approx(top_label_ece(yi, model_probs, 10),
                                                             abs=1e-12)
    assert got["calibration_classwise_ece"] == pytest.approx(classwise_ece(yi, model_probs, 10),
                                                             abs=1e-12)
    assert "calibration_ece" not in got
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(run_id)}
    assert {"calibration_reliability_multiclass.png", "calibration_reliability_corp.png"} <= arts


def test_sklearn_multiclass_model(store, data):
    model, test = data
    with mlflow.start_run() as run:
        info = mlflow.sklearn.log_model(model, name="nb", pip_requirements=["scikit-learn"])
        result = mlflow.models.evaluate(info.model_uri, test, targets="y",
                                        model_type="classifier", evaluators=["calibration"],
                                        evaluator_config={"calibration": {"min_rows": 50}})
    p = model.predict_proba(test.drop(columns=["y"]))
    _check_metrics(run.info.run_id, p, test, model.classes_)
    assert "calibration_reliability_multiclass" in result.artifacts


def test_mlcal_multiclass_model_via_flavour(store, data):
    model, test = data
    cal, holdout, run_id = evaluate_calibrated(model, test, "temperature", 50, ["scikit-learn"],
                                               {"calibration": {"min_rows": 50}})
    _check_metrics(run_id, cal.predict_proba(holdout.drop(columns=["y"])), holdout,
                   cal.classes_)


@pytest.mark.parametrize("kind, error, message", [
    ("nan", MissingLabelError, "labels are missing"),
    ("unknown", UnknownLabelError, "'merlot'"),
    ("absent", MissingClassError, "never occur"),
])
def test_bad_multiclass_labels_are_refused(store, data, kind, error, message):
    model, test = data
    test = test.copy()
    test["y"] = test["y"].astype(object)
    if kind == "nan":
        test.loc[test.index[3], "y"] = None
    elif kind == "unknown":
        test.loc[test.index[3], "y"] = "merlot"
    else:
        test = test[test["y"] != "barolo"]
    with mlflow.start_run():
        info = mlflow.sklearn.log_model(model, name="nb", pip_requirements=["scikit-learn"])
        with pytest.raises(error, match=message):
            mlflow.models.evaluate(info.model_uri, test, targets="y", model_type="classifier",
                                   evaluators=["calibration"],
                                   evaluator_config={"calibration": {"min_rows": 10}})
