"""Per-run calibration logging of a multiclass (K >= 3) model: the part of
:func:`mlcal.mlflow.log_calibration` taken when the probabilities are an (n, K) matrix.

Logged metrics, for m in :data:`mlcal.multiclass_metrics.MULTICLASS_METRIC_NAMES`
(``top_label_ece``, ``classwise_ece``, ``multiclass_brier``, ``log_loss``, ``accuracy``):
``{prefix}{m}_before``, ``_after`` and ``_improvement`` (positive = better). ``log_loss`` and
``accuracy`` are the binary names because they mean the same thing; the binary ``ece`` and
``brier`` are not logged for a multiclass model (no value of the same meaning).

Artifacts in ``{artifact_dir}/``: ``{prefix}reliability_class<k>_<label>.png`` for each class
(one-vs-rest, before and after), ``{prefix}reliability_top_label.png`` (calibrated) and
``{prefix}reliability_top_label_uncalibrated.png``, and ``{prefix}calibration_report.json``
(every metric, the per-class ECEs and class counts).
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any, Sequence

import numpy as np

from mlcal._atomic import write_json
from mlcal.multiclass_metrics import (MULTICLASS_METRIC_NAMES, _check, multiclass_metrics,
                                      per_class_ece)


def multiclass_report(y, p_before, p_after, *, classes: Sequence | None = None,
                      n_bins: int = 10, strategy: str = "uniform") -> dict[str, Any]:
    """Metrics before and after calibration, their improvement and per-class details.

    ``y`` holds class indices ``0 .. K-1``; ``p_before``/``p_after`` are (n, K) probability
    matrices. Improvement is ``before - after`` for losses, ``after - before`` for accuracy.
    """
    yi, _ = _check(y, p_before)
    K = np.shape(p_before)[1]
    if np.shape(p_after) != np.shape(p_before):
        raise ValueError(f"p_before has shape {np.shape(p_before)} but p_after "
                         f"{np.shape(p_after)}")
    names = list(range(K)) if classes is None else np.asarray(classes).tolist()
    before = multiclass_metrics(yi, p_before, n_bins, strategy)
    after = multiclass_metrics(yi, p_after, n_bins, strategy)
    improvement = {m: (after[m] - before[m]) if higher else (before[m] - after[m])
                   for m, higher in MULTICLASS_METRIC_NAMES.items()}
    counts = np.bincount(yi, minlength=K)
    per_class = [{"class": c, "count": int(n), "ece_before": b, "ece_after": a}
                 for c, n, b, a in zip(names, counts, per_class_ece(yi, p_before, n_bins, strategy),
                                       per_class_ece(yi, p_after, n_bins, strategy))]
    return {"n": int(yi.size), "n_classes": K, "classes": names, "n_bins": n_bins,
            "strategy": strategy, "before": before, "after": after,
            "improvement": improvement, "per_class": per_class}


def log_multiclass_calibration(y, p_before, p_after, *, prefix: str = "", calibrator=None,
                               classes: Sequence | None = None, n_bins: int = 10,
                               strategy: str = "uniform",
                               artifact_dir: str = "calibration") -> dict[str, Any]:
    """Log a multiclass calibration to the active run (see the module notes); returns the
    :func:`multiclass_report` that was logged (plus the calibrator's details)."""
    import mlflow

    from mlcal.mlflow.flavor import calibration_method
    from mlcal.multiclass_plotting import plot_multiclass_reliability

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
    mlflow.log_metrics(metrics)
    with tempfile.TemporaryDirectory(prefix="mlcal-log-") as tmp:
        stem = os.path.join(tmp, f"{prefix}reliability_")
        figures = plot_multiclass_reliability(y, p_before, p_after, classes=report["classes"],
                                              n_bins=n_bins, strategy=strategy, path_prefix=stem)
        report_path = os.path.join(tmp, f"{prefix}calibration_report.json")
        write_json(report_path, report, indent=1)
        for name in figures:
            mlflow.log_artifact(f"{stem}{name}.png", artifact_path=artifact_dir)
        mlflow.log_artifact(report_path, artifact_path=artifact_dir)
    if calibrator is not None:
        mlflow.set_tags({f"mlcal.{prefix}method": calibration_method(calibrator),
                         f"mlcal.{prefix}map_type": calibrator.map_.kind,
                         f"mlcal.{prefix}n_classes": str(report["n_classes"])})
    return report
