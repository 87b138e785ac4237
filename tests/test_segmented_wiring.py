"""Issue #30: a segmented CalibratedModel through calibrate_and_log and the promotion gate on
a real sqlite MLflow registry.

The base model ignores the region (fitted on labels without the region effect); the true
log-odds move by +-0.9 with the region, so only the segmented calibrator is right per region.
Its held-out metrics must equal those computed directly from ``predict_calibrated`` (and
independent scikit-learn metrics); the gate must score it with the segments of the evaluation
frame (candidate, base model and constant comparisons) and refuse a candidate whose
per-region offsets are sign-flipped."""

import copy

import mlflow
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, log_loss

from mlcal import CalibratedModel
from mlcal.calibrators.segmented import SegmentedCalibrator
from mlcal.holdout import holdout_split
from mlcal.maps.segmented import SegmentedMap

NAME = "segwire"
FAST = dict(pip_requirements=["scikit-learn"], bundle_mlcal=False)


def _population(n, seed):
    rng = np.random.default_rng(seed)
    region = rng.choice(["north", "south"], n)
    rc = np.where(region == "north", 0.9, -0.9)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    eta = x1 - 0.5 * x2
    y = (rng.random(n) < 1 / (1 + np.exp(-(eta + rc)))).astype(int)
    y_blind = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"x1": x1, "x2": x2, "region": region}), y, y_blind


@pytest.fixture(scope="module")
def data():
    X, y, y_blind = _population(8000, seed=5)
    blind = LogisticRegression().fit(X.loc[:2999, ["x1", "x2"]], y_blind[:3000])
    cal = (X.iloc[3000:6000].reset_index(drop=True), y[3000:6000])
    test = X.iloc[6000:].reset_index(drop=True)
    test["y"] = y[6000:]
    return blind, cal, test


def _flipped(model):
    """A copy of a segmented model with every segment offset negated."""
    out = copy.deepcopy(model)
    m = out.calibrator_.map_
    out.calibrator_.map_ = SegmentedMap(m.inner, m.columns, m.keys, m.slopes, -m.offsets,
                                        m.unseen)
    return out


def test_calibrate_and_log_and_gate_a_segmented_model(sqlite_tracking, data, tmp_path):
    import mlcal.mlflow as mlcal_mlflow
    from mlcal.mlflow import calibrate_and_log
    from mlcal.mlflow.gate import promote

    blind, (X_cal, y_cal), test = data
    run = calibrate_and_log(blind, X_cal, y_cal, calibrator=SegmentedCalibrator("platt"),
                            segment_columns=["region"], registered_model_name=NAME,
                            run_name="seg", html_report=False, **FAST)
    # (a segmented model's HTML report: test_segmented_flavor.py)
    model = run.model
    assert model.segment_columns == ["region"]
    assert isinstance(model.calibrator_, SegmentedCalibrator)
    # the held-out metrics are those of predict_calibrated on the held-out rows
    fit_rows, held = holdout_split(y_cal, 0.25, 0)
    _, p = model.predict_calibrated(X_cal.iloc[held])
    yh = y_cal[held]
    after = run.report["after"]
    assert after["log_loss"] == pytest.approx(log_loss(yh, p), rel=1e-9)
    assert after["brier"] == pytest.approx(brier_score_loss(yh, p), rel=1e-9)
    logged = mlflow.MlflowClient().get_run(run.run_id).data.metrics
    assert logged["log_loss_after"] == pytest.approx(log_loss(yh, p), rel=1e-9)
    # and the segments matter: the shared map alone does worse on these rows
    shared = model.calibrator_.map_.inner(model.predict_uncalibrated(X_cal.iloc[held]))
    assert log_loss(yh, shared) > log_loss(yh, p) + 0.02
    # a segmented calibrator without its columns is a named error
    with pytest.raises(ValueError, match="model_segment_columns"):
        calibrate_and_log(blind, X_cal, y_cal, calibrator=SegmentedCalibrator("platt"), **FAST)

    # the gate: no holder, so usefulness against the constant and the base model on the rows
    d = promote(NAME, "1", max_ece=0.05, data=test, label_column="y", report=False)
    assert d.promoted, d.explain()
    X_test, y_test = test.drop(columns=["y"]), test["y"].to_numpy()
    _, p_test = model.predict_calibrated(X_test)
    from mlcal.metrics import ece

    assert d.candidate_ece == pytest.approx(ece(y_test, p_test), abs=1e-12)
    names = {c.name for c in d.criteria}
    assert {"ece"} < names and len(names) >= 3, d.explain()

    # a candidate with sign-flipped segment offsets is refused against the holder
    with mlflow.start_run():
        info = mlcal_mlflow.log_model(_flipped(model), name="model",
                                      registered_model_name=NAME,
                                      input_example=X_test.iloc[:3], **FAST)
    v2 = str(info.registered_model_version)
    d2 = promote(NAME, v2, max_ece=0.05, data=test, label_column="y", report=False)
    assert not d2.promoted, d2.explain()
    failed = {c.name for c in d2.criteria if c.passed is False}
    assert "ece" in failed or "log_loss" in failed, d2.explain()
    # the segment criterion names the flipped regions too
    d3 = promote(NAME, v2, max_ece=0.05, data=test, label_column="y", report=False,
                 max_segment_citl=0.03, segment_columns=["region"], min_segment_rows=100)
    assert not d3.promoted
    assert next(c for c in d3.criteria if c.name == "segment_citl").passed is False
    client = mlflow.MlflowClient()
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "1"

    # the calibration evaluator plugin scores it with the frame's segments too
    with mlflow.start_run() as ev_run:
        mlflow.models.evaluate(f"models:/{NAME}/1", test, targets="y", model_type="classifier",
                               evaluators=["calibration"])
    got = mlflow.MlflowClient().get_run(ev_run.info.run_id).data.metrics
    assert got["calibration_ece"] == pytest.approx(ece(y_test, p_test), abs=1e-12)
    assert got["calibration_log_loss"] == pytest.approx(log_loss(y_test, p_test), rel=1e-9)

    # the monitoring loop refuses a segmented model by name (its window holds no segment keys)
    from mlcal.monitor.loop import SegmentedModelNotMonitoredError, run_batch

    with pytest.raises(SegmentedModelNotMonitoredError, match="segmented.*region"):
        run_batch(state_path=str(tmp_path / "STATE.json"), model_uri=f"models:/{NAME}@champion",
                  frame=test, label_column="y")
    assert not (tmp_path / "STATE.json").exists()


def test_reoffset_refuses_a_segmented_model_by_name(data):
    import mlcal

    blind, (X_cal, y_cal), test = data
    model = CalibratedModel(blind, "platt", segment_columns=["region"]).fit(X_cal, y_cal)
    with pytest.raises(ValueError, match="reoffset: segmented models"):
        mlcal.reoffset(model, X=test.drop(columns=["y"]), y=test["y"].to_numpy())
    with pytest.raises(ValueError, match="reoffset: segmented models"):
        mlcal.reoffset(model, 0.3)
