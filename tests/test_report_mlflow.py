"""Run logging of the HTML report and the ``mlcal report`` command on a logged model, with a
real sqlite MLflow store and a real subprocess."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlcal.metrics import ece
from test_report import EXTERNAL, GATE

ROOT = Path(__file__).resolve().parents[1]


def test_calibrate_and_log_logs_the_report_and_mlcal_report_writes_it(sqlite_tracking,
                                                                     tmp_path, capsys):
    import mlflow
    from sklearn.linear_model import LogisticRegression

    from mlcal.mlflow import calibrate_and_log

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 3))
    y = (rng.uniform(size=1200) < 1 / (1 + np.exp(-(X @ [1.2, -0.8, 0.3])))).astype(int)
    base = LogisticRegression(C=0.02).fit(X[:400], y[:400])
    with mlflow.start_run() as run:
        out = calibrate_and_log(base, X[400:800], y[400:800], calibrator="platt",
                                X_eval=X[800:], y_eval=y[800:])
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id,
                                                                   "calibration")}
    assert {"calibration/calibration_report.html",
            "calibration/reliability_corp.png"} <= arts
    page = mlflow.artifacts.load_text(f"runs:/{run.info.run_id}/calibration/"
                                      "calibration_report.html")
    assert run.info.run_id in page and not EXTERNAL.search(page)
    # html_report=False (binary and multiclass): the same metrics, JSON report and model, no
    # diagrams and no HTML report
    from sklearn.naive_bayes import GaussianNB

    y3 = np.digitize(X[:, 0] + rng.normal(size=1200), [-0.5, 0.5])
    for base_k, labels in ((base, y), (GaussianNB().fit(X[:400], y3[:400]), y3)):
        with mlflow.start_run() as bare:
            quiet = calibrate_and_log(base_k, X[400:800], labels[400:800],
                                      calibrator="platt" if base_k is base else "temperature",
                                      X_eval=X[800:], y_eval=labels[800:], html_report=False)
        arts = {a.path.rsplit("/", 1)[-1] for a in mlflow.MlflowClient().list_artifacts(
            bare.info.run_id, "calibration")}
        assert "calibration_report.json" in arts and not {
            "calibration_report.html", "reliability_corp.png"} & arts, arts
        assert "log_loss_after" in mlflow.MlflowClient().get_run(bare.info.run_id).data.metrics
        assert quiet.model_uri

    data = tmp_path / "holdout.csv"
    frame = pd.DataFrame(X[800:], columns=["f0", "f1", "f2"]).assign(label=y[800:])
    frame.to_csv(data, index=False)
    html_out = tmp_path / "report.html"
    env = {"PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": sqlite_tracking,
           "PATH": "/usr/bin:/bin"}
    gate_file = tmp_path / "decision.json"
    gate_file.write_text(json.dumps(GATE))
    done = subprocess.run([sys.executable, "-m", "mlcal", "report", out.model_uri, "--data",
                           str(data), "--label-column", "label", "-o", str(html_out),
                           "--n-resamples", "20", "--gate", str(gate_file)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    page = html_out.read_text()
    assert page.startswith("<!DOCTYPE html>") and out.model_uri in page
    assert "id='gate-section'" in page and "fraud &lt;model&gt; version 7" in page
    # the report's ECE after calibration is the model's on those rows
    p_after = out.model.predict_proba(X[800:])[:, 1]
    assert f"{ece(y[800:], p_after):.4f}" in page
    # a missing label column is a named error, exit 2, nothing written
    from mlcal.cli import main

    code = main(["report", out.model_uri, "--data", str(data), "-o", str(tmp_path / "no.html")])
    assert code == 2 and "no label column 'y'" in capsys.readouterr().err
    assert not (tmp_path / "no.html").exists()


def test_report_command_refuses_a_file_that_is_not_a_gate_decision(tmp_path, capsys):
    pytest.importorskip("mlflow")
    from mlcal.cli import main

    data = tmp_path / "d.csv"
    pd.DataFrame({"f0": [0.1, 0.2], "y": [0, 1]}).to_csv(data, index=False)
    gate = tmp_path / "gate.json"
    gate.write_text("[1, 2]")
    code = main(["report", str(tmp_path / "model"), "--data", str(data), "--gate", str(gate),
                 "-o", str(tmp_path / "r.html")])
    assert code == 2 and "is not a gate decision" in capsys.readouterr().err
    code = main(["report", str(tmp_path / "model"), "--data", str(tmp_path / "none.csv"),
                 "-o", str(tmp_path / "r.html")])
    assert code == 2 and "data file not found" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
