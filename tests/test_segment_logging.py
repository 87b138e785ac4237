"""Issue #30 item 4: per-segment metrics in run logging (log_calibration, calibrate_and_log) and
in the ``calibration`` evaluator plugin (real mlflow.models.evaluate on a sqlite store). The
logged table and metrics must equal :func:`mlcal.metrics.segment_report` on the same rows."""

import json

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")

from mlcal.metrics import segment_report  # noqa: E402
from mlcal.metrics.segments import worst_segment_metrics  # noqa: E402
from support.mlflow_store import sqlite_store  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    # one real sqlite store for the module (creating one takes seconds on a busy machine)
    root = tmp_path_factory.mktemp("segment_store")
    with sqlite_store(root, "segments"):
        yield root


def _download(run_id, path, tmp_path):
    return mlflow.MlflowClient().download_artifacts(run_id, path, str(tmp_path))


def _frame(n=1600, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n)})
    region = rng.choice(["north", "south", "tiny"], n, p=[0.49, 0.49, 0.02])
    shift = np.select([region == "north", region == "south"], [0.8, -0.8], 0.0)
    eta = (X["x1"] - X["x2"]).to_numpy() + shift
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    return X, region, y


def test_log_calibration_logs_the_segment_table_and_worst_metrics(store, tmp_path):
    from mlcal.mlflow import log_calibration

    X, region, y = _frame()
    p_before = 1 / (1 + np.exp(-(X["x1"] - X["x2"]).to_numpy()))
    p_after = np.clip(p_before * 0.9 + 0.05, 0, 1)
    keys = pd.DataFrame({"region": region})
    with mlflow.start_run() as run:
        report = log_calibration(y, p_before, p_after, segments=keys, html_report=False,
                                 prefix="t_")
    ref = segment_report(y, p_after, keys)
    got = mlflow.MlflowClient().get_run(run.info.run_id).data
    for name, value in worst_segment_metrics(ref, "t_").items():
        assert got.metrics[name] == pytest.approx(value, rel=1e-12), name
    assert got.metrics["t_segment_eligible_count"] == 2 and got.metrics["t_segment_count"] == 3
    assert got.tags["mlcal.t_segment_worst"] == ref.worst["label"]
    doc = json.load(open(_download(run.info.run_id, "calibration/t_segment_report.json",
                                   tmp_path)))
    assert doc == json.loads(json.dumps(ref.to_dict()))
    assert report["segments"]["worst"]["label"] == ref.worst["label"]
    table = pd.read_csv(_download(run.info.run_id, "calibration/t_segment_report.csv",
                                  tmp_path / "c"))
    assert list(table["region"]) == ["north", "south", "tiny"]
    assert np.allclose(table["citl"], [s["citl"] for s in ref.table], rtol=0, atol=1e-12)
    assert list(table["eligible"]) == [True, True, False]


def test_calibrate_and_log_reports_the_held_out_rows_segments(store):
    from sklearn.linear_model import LogisticRegression

    from mlcal.holdout import holdout_split
    from mlcal.mlflow import calibrate_and_log
    from mlcal.metrics.segments import NoEligibleSegmentError

    X, region, y = _frame(2400, seed=1)
    base = LogisticRegression().fit(X.iloc[:800], y[:800])
    Xc, yc, rc = X.iloc[800:].reset_index(drop=True), y[800:], region[800:]
    result = calibrate_and_log(base, Xc, yc, calibrator="platt", segments=rc,
                               pip_requirements=["scikit-learn"], bundle_mlcal=False)
    _, held = holdout_split(yc, 0.25, 0)
    p = result.model.predict_proba(Xc.iloc[held])[:, 1]
    ref = segment_report(yc[held], p, rc[held])
    seg = result.report["segments"]
    assert sum(s["rows"] for s in seg["segments"]) == held.size
    assert seg["worst"]["label"] == ref.worst["label"]
    assert seg["worst"]["citl"] == pytest.approx(ref.worst["citl"], abs=1e-12)
    logged = mlflow.MlflowClient().get_run(result.run_id).data.metrics
    assert logged["segment_worst_citl"] == pytest.approx(ref.worst["citl"], abs=1e-12)
    # too large a minimum is refused before any run is started
    runs = len(mlflow.search_runs())
    with pytest.raises(NoEligibleSegmentError):
        calibrate_and_log(base, Xc, yc, calibrator="platt", segments=rc,
                          min_segment_rows=10_000)
    assert len(mlflow.search_runs()) == runs


def test_evaluator_plugin_adds_segment_metrics_and_artifacts(store, tmp_path):
    from sklearn.naive_bayes import GaussianNB

    X, region, y = _frame(2000, seed=2)
    model = GaussianNB().fit(X.iloc[:1000], y[:1000])
    test = X.iloc[1000:].reset_index(drop=True)
    test["region"] = region[1000:]
    test["y"] = y[1000:]
    with mlflow.start_run() as run:
        info = mlflow.sklearn.log_model(model, name="nb", pip_requirements=["scikit-learn"],
                                        input_example=X.iloc[:2])
        result = mlflow.models.evaluate(
            info.model_uri, test, targets="y", model_type="classifier",
            evaluators=["calibration"],
            evaluator_config={"calibration": {"segment_columns": ["region"],
                                              "min_segment_rows": 50}})
    p = model.predict_proba(X.iloc[1000:])[:, 1]
    ref = segment_report(y[1000:], p, region[1000:], min_segment_rows=50)
    got = mlflow.MlflowClient().get_run(run.info.run_id).data.metrics
    for name, value in worst_segment_metrics(ref, "calibration_").items():
        assert got[name] == pytest.approx(value, rel=1e-12), name
        assert result.metrics[name] == pytest.approx(value, rel=1e-12)
    doc = json.load(open(_download(run.info.run_id, "calibration_segment_report.json",
                                   tmp_path)))
    assert doc["worst"]["label"] == ref.worst["label"]
    assert [s["label"] for s in doc["segments"]] == ["north", "south", "tiny"]
    assert "calibration_segment_report_csv" in result.artifacts
    # the plain metrics are those of the whole data, as without segments
    from mlcal.metrics import ece
    assert got["calibration_ece"] == pytest.approx(ece(y[1000:], p), abs=1e-12)


def test_evaluator_plugin_segments_of_a_multiclass_model_are_top_label(store):
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(3)
    n = 1500
    X = pd.DataFrame(rng.normal(size=(n, 2)), columns=["x1", "x2"])
    y = np.digitize(X["x1"].to_numpy() + rng.normal(size=n), [-0.5, 0.5])   # classes 0, 1, 2
    region = rng.choice(["north", "south"], n)
    model = LogisticRegression().fit(X.iloc[:700], y[:700])
    test = X.iloc[700:].reset_index(drop=True).assign(region=region[700:], y=y[700:])
    with mlflow.start_run() as run:
        info = mlflow.sklearn.log_model(model, name="lr", pip_requirements=["scikit-learn"],
                                        input_example=X.iloc[:2])
        mlflow.models.evaluate(info.model_uri, test, targets="y", model_type="classifier",
                               evaluators=["calibration"],
                               evaluator_config={"calibration": {"segment_columns": "region"}})
    ref = segment_report(y[700:], model.predict_proba(X.iloc[700:]), region[700:])
    assert ref.settings["multiclass"]
    got = mlflow.MlflowClient().get_run(run.info.run_id).data.metrics
    for name, value in worst_segment_metrics(ref, "calibration_").items():
        assert got[name] == pytest.approx(value, rel=1e-12), name
