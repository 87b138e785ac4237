"""Self-contained HTML calibration reports.

* :func:`assemble_report` (:mod:`mlcal.report.data`) computes what a report shows;
* :func:`render_html` (:mod:`mlcal.report.html`) turns it into one HTML page with inline SVG
  figures and CSS (no network, no JavaScript);
* :func:`build_report` does both; :func:`write_report` writes the page atomically;
* :func:`report_for_model` evaluates a fitted :class:`~mlcal.model.CalibratedModel` on data;
* :func:`log_report` logs the page to the active MLflow run as ``calibration_report.html``
  (readable in the MLflow UI's artifact view).

A gate decision is rendered by passing ``gate=decision.as_dict()``
(:meth:`mlcal.mlflow.gate.GateDecision.as_dict`) to any of them.
"""

from __future__ import annotations

from mlcal.report.data import (DEFAULT_REPORT_RESAMPLES, CalibrationReport, assemble_report,
                               calibrator_summary)
from mlcal.report.html import render_html
from mlcal.report.model import build_report, log_report, report_for_model, write_report

REPORT_ARTIFACT = "calibration_report.html"

__all__ = ["CalibrationReport", "DEFAULT_REPORT_RESAMPLES", "REPORT_ARTIFACT",
           "assemble_report", "build_report", "calibrator_summary", "log_report",
           "render_html", "report_for_model", "write_report"]
