"""log_calibration also logs the small-sample estimators (debiased/smooth/adaptive ECE,
Spiegelhalter's Z) before and after calibration, on a real sqlite tracking store."""

import json
import os

import numpy as np
import pytest

mlflow = pytest.importorskip("mlflow")

from mlcal import metrics  # noqa: E402
from mlcal.mlflow import log_calibration  # noqa: E402


def test_diagnostics_logged_before_and_after(sqlite_tracking):
    rng = np.random.default_rng(5)
    p_before = rng.uniform(0.02, 0.98, 400)
    y = (rng.uniform(size=400) < p_before ** 2).astype(float)
    p_after = p_before ** 2
    with mlflow.start_run() as run:
        # the JSON report is read here; the HTML report: test_mlflow_flavor.py
        log_calibration(y, p_before, p_after, html_report=False)
    client = mlflow.MlflowClient()
    m = client.get_run(run.info.run_id).data.metrics
    for part, p in (("before", p_before), ("after", p_after)):
        assert m[f"debiased_ece_{part}"] == pytest.approx(metrics.debiased_ece(y, p), abs=1e-12)
        assert m[f"smooth_ece_{part}"] == pytest.approx(metrics.smooth_ece(y, p), abs=1e-12)
        assert m[f"adaptive_ece_{part}"] == pytest.approx(metrics.adaptive_ece(y, p), abs=1e-12)
        z, pv = metrics.spiegelhalter_z(y, p)
        assert m[f"spiegelhalter_z_{part}"] == pytest.approx(z, abs=1e-12)
        assert m[f"spiegelhalter_p_{part}"] == pytest.approx(pv, abs=1e-12)
    assert m["smooth_ece_after"] < m["smooth_ece_before"]
    local = client.download_artifacts(run.info.run_id, "calibration")
    with open(os.path.join(local, "calibration_report.json")) as fh:
        report = json.load(fh)
    assert report["diagnostics"]["after"]["debiased_ece"] == pytest.approx(
        m["debiased_ece_after"])
