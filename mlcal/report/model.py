"""Reports from arrays or from a fitted model, written to a file or logged to MLflow."""

from __future__ import annotations

import os
from typing import Any

from mlcal.report.data import CalibrationReport, assemble_report
from mlcal.report.html import render_html


def build_report(y, p_before, p_after, **kwargs: Any) -> str:
    """The HTML report of forecasts before and after calibration: :func:`assemble_report`
    (same arguments) then :func:`render_html`."""
    return render_html(assemble_report(y, p_before, p_after, **kwargs))


def report_for_model(model, X, y, *, gate: dict | None = None, source: dict | None = None,
                     title: str = "Calibration report", **kwargs: Any) -> CalibrationReport:
    """Evaluate a fitted :class:`~mlcal.model.CalibratedModel` on ``(X, y)``.

    ``y`` holds the model's class labels (``classes_``; missing or unknown labels are named
    errors). "Before" is the base model's probability (the score squashed as the calibrator
    itself starts from it), "after" the calibrated probability. Other keyword arguments go to
    :func:`assemble_report`.
    """
    from mlcal.base_models.scores import naive_probability, naive_probability_matrix
    from mlcal.labels import multiclass_labels, positive_indicator

    scores = model.predict_uncalibrated(X)
    if len(model.classes_) > 2:
        yv = multiclass_labels(y, model.classes_, min_rows=1, name="labels")
        p_before = naive_probability_matrix(scores, model.score_source_)
        p_after = model.calibrator_.predict_proba(scores)
        kwargs.setdefault("classes", [str(c) for c in model.classes_])
        map_data = None
    else:
        yv = positive_indicator(y, model.classes_, name="labels")
        p_before = naive_probability(scores, model.score_source_)
        _, p_after = model.predict_calibrated(X)   # (reads a segmented model's segments)
        # a segmented or multicalibration map has no one curve over the score to draw
        map_data = None if (getattr(model, "segment_columns", None)
                            or getattr(model, "_multicalibrated", False)) else (scores, yv)
    kwargs.setdefault("map_data", map_data)
    return assemble_report(yv, p_before, p_after, calibrator=model.calibrator_, gate=gate,
                           source=source, title=title, **kwargs)


def write_report(path: str | os.PathLike, report: CalibrationReport | str, *,
                 overwrite: bool = True) -> str:
    """Write a report (a :class:`CalibrationReport` or its HTML) to ``path`` atomically (a
    killed process never leaves half a page); returns the path."""
    from mlcal._atomic import atomic_path

    text = report if isinstance(report, str) else render_html(report)
    with atomic_path(str(path), overwrite=overwrite) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
    return str(path)


def log_report(report: CalibrationReport | str, *, artifact_dir: str = "calibration",
               prefix: str = "") -> str:
    """Log a report to the active MLflow run as ``{artifact_dir}/{prefix}calibration_report.html``
    (the MLflow UI shows HTML artifacts in its artifact view); returns the artifact path."""
    import mlflow

    text = report if isinstance(report, str) else render_html(report)
    name = f"{artifact_dir}/{prefix}calibration_report.html" if artifact_dir else \
        f"{prefix}calibration_report.html"
    mlflow.log_text(text, name)
    return name

