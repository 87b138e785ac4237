"""Logging a run's calibration report and CORP diagrams to MLflow (one call for the trackers)."""

from __future__ import annotations

import os
import tempfile
from typing import Sequence

from mlcal.report.data import assemble_report
from mlcal.report.model import log_report


def log_run_report(y, p_before, p_after, *, calibrator=None, map_data=None,
                   classes: Sequence | None = None, gate: dict | None = None,
                   n_bins: int = 10, strategy: str = "uniform",
                   artifact_dir: str = "calibration", prefix: str = "") -> str:
    """Log ``{artifact_dir}/{prefix}reliability_corp.png`` (CORP reliability diagram with
    consistency bands; multiclass: top label and every class) and
    ``{artifact_dir}/{prefix}calibration_report.html`` (:mod:`mlcal.report`) to the active
    run. Arguments as in :func:`mlcal.report.assemble_report` (``y`` in {0, 1} or class
    indices); returns the report's artifact path."""
    import mlflow

    from mlcal.plotting.corp import corp_reliability_diagram, plot_multiclass_corp_reliability

    run = mlflow.active_run()
    source = {} if run is None else {"MLflow run": run.info.run_id}
    report = assemble_report(y, p_before, p_after, calibrator=calibrator, map_data=map_data,
                             classes=classes, gate=gate, n_bins=n_bins, strategy=strategy,
                             source=source)
    with tempfile.TemporaryDirectory(prefix="mlcal-report-") as tmp:
        path = os.path.join(tmp, f"{prefix}reliability_corp.png")
        if report.multiclass:
            plot_multiclass_corp_reliability(report.y, report.p_before, report.p_after,
                                             class_names=report.class_names, n_bins=n_bins,
                                             strategy=strategy, path=path)
        else:
            corp_reliability_diagram(report.y, report.p_before, report.p_after, n_bins=n_bins,
                                     strategy=strategy, path=path)
        mlflow.log_artifact(path, artifact_path=artifact_dir)
    return log_report(report, artifact_dir=artifact_dir, prefix=prefix)
