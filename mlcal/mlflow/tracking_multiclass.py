"""Per-run calibration logging of a multiclass (K >= 3) model: the part of
:func:`mlcal.mlflow.log_calibration` taken when the probabilities are an (n, K) matrix.

Logged metrics, for m in :data:`mlcal.metrics.multiclass.MULTICLASS_METRIC_NAMES`
(``top_label_ece``, ``classwise_ece``, ``multiclass_brier``, ``log_loss``, ``accuracy``):
``{prefix}{m}_before``, ``_after`` and ``_improvement`` (positive = better). ``log_loss`` and
``accuracy`` are the binary names because they mean the same thing; the binary ``ece`` and
``brier`` are not logged for a multiclass model (no value of the same meaning).

Artifacts in ``{artifact_dir}/``: ``{prefix}reliability_class<k>_<label>.png`` for each class
(one-vs-rest, before and after), ``{prefix}reliability_top_label.png`` (calibrated) and
``{prefix}reliability_top_label_uncalibrated.png``, and ``{prefix}calibration_report.json``
(every metric, the per-class ECEs and class counts); with ``html_report`` also
``{prefix}reliability_corp.png`` (CORP diagrams with consistency bands) and
``{prefix}calibration_report.html`` (:mod:`mlcal.report`).
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any, Sequence


from mlcal._atomic import write_json
from mlcal.metrics.multiclass import MULTICLASS_METRIC_NAMES, multiclass_report


def log_multiclass_calibration(y, p_before, p_after, *, prefix: str = "", calibrator=None,
                               classes: Sequence | None = None, n_bins: int = 10,
                               strategy: str = "uniform",
                               artifact_dir: str = "calibration",
                               html_report: bool = True) -> dict[str, Any]:
    """Log a multiclass calibration to the active run (see the module notes); returns the
    :func:`multiclass_report` that was logged (plus the calibrator's details)."""
    import mlflow

    from mlcal.mlflow.flavor import calibration_method
    from mlcal.plotting import plot_multiclass_reliability

    report = multiclass_report(y, p_before, p_after, classes=classes, n_bins=n_bins,
                               strategy=strategy)
    metrics = {f"{prefix}{m}_{part}": float(report[part][m])
               for m in MULTICLASS_METRIC_NAMES for part in ("before", "after", "improvement")
               if math.isfinite(report[part][m])}
    if calibrator is not None:
        report["calibrator"] = {"method": calibration_method(calibrator),
                                "params": calibrator.get_params(deep=False),
                                "map_type": calibrator.map_.kind,
                                "map_size": int(calibrator.map_.size)}
        if getattr(calibrator, "selection_", None) is not None:   # auto: what it compared
            report["calibrator"]["fit_info"] = calibrator.selection_
    mlflow.log_metrics(metrics)
    with tempfile.TemporaryDirectory(prefix="mlcal-log-") as tmp:
        figure_path = os.path.join(tmp, f"{prefix}reliability_multiclass.png")
        plot_multiclass_reliability(y, p_before, p_after,
                                    class_names=[str(c) for c in report["classes"]],
                                    n_bins=n_bins, strategy=strategy, path=figure_path)
        report_path = os.path.join(tmp, f"{prefix}calibration_report.json")
        write_json(report_path, report, indent=1)
        mlflow.log_artifact(figure_path, artifact_path=artifact_dir)
        mlflow.log_artifact(report_path, artifact_path=artifact_dir)
    if html_report:
        from mlcal.report.mlflow_logging import log_run_report

        log_run_report(y, p_before, p_after, calibrator=calibrator,
                       classes=[str(c) for c in report["classes"]], n_bins=n_bins,
                       strategy=strategy, artifact_dir=artifact_dir, prefix=prefix)
    if calibrator is not None:
        tags = {f"mlcal.{prefix}method": calibration_method(calibrator),
                f"mlcal.{prefix}map_type": calibrator.map_.kind,
                f"mlcal.{prefix}n_classes": str(report["n_classes"])}
        if getattr(calibrator, "selection_", None) is not None:
            tags[f"mlcal.{prefix}auto_chosen"] = calibrator.selection_["chosen"]
        mlflow.set_tags(tags)
    return report
