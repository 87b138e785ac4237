"""Per-segment calibration metrics in run logging (:func:`mlcal.metrics.segment_report`).

:func:`log_segment_report` logs, to the active run,

* the artifacts ``{artifact_dir}/{prefix}segment_report.json`` (the whole report,
  :meth:`~mlcal.metrics.segments.SegmentReport.to_dict`) and ``.csv`` (one row per segment);
* the run metrics of :func:`mlcal.metrics.segments.worst_segment_metrics`:
  ``{prefix}segment_worst_citl`` (observed - predicted of the worst segment),
  ``_citl_lower``, ``_citl_upper``, ``_citl_excess`` (its lower bound of ``|O - E|``, what the
  worst segment is chosen by), ``_ece``, ``_log_loss``, ``_brier``, ``_rows``,
  ``{prefix}segment_max_ece``, ``{prefix}segment_count`` and
  ``{prefix}segment_eligible_count``;
* the tag ``mlcal.{prefix}segment_worst`` (the worst segment's label).
"""

from __future__ import annotations

import tempfile
from typing import Sequence

import numpy as np

from mlcal.metrics.segments import (DEFAULT_MIN_SEGMENT_ROWS, SegmentReport, segment_keys,
                                   segment_report, worst_segment_metrics,
                                   write_segment_artifacts)


def log_segment_report(y, p, segments, *, prefix: str = "", artifact_dir: str = "calibration",
                       min_segment_rows: float = DEFAULT_MIN_SEGMENT_ROWS, n_bins: int = 10,
                       strategy: str = "uniform") -> SegmentReport:
    """Compute :func:`~mlcal.metrics.segments.segment_report` of the calibrated probabilities
    ``p`` and log it to the active run (see the module docstring); returns the report."""
    import mlflow

    rep = segment_report(y, p, segments, min_segment_rows=min_segment_rows, n_bins=n_bins,
                         strategy=strategy)
    mlflow.log_metrics(worst_segment_metrics(rep, prefix))
    mlflow.set_tag(f"mlcal.{prefix}segment_worst", rep.worst["label"][:5000])
    with tempfile.TemporaryDirectory(prefix="mlcal-seg-") as tmp:
        for path in write_segment_artifacts(rep, tmp, f"{prefix}segment_report"):
            mlflow.log_artifact(path, artifact_path=artifact_dir)
    return rep


def resolve_segments(segments, segment_columns: Sequence[str] | None, X):
    """The segment keys of the rows of ``X``: ``segments`` as given, or the
    ``segment_columns`` of the DataFrame ``X`` (a missing column is a
    :class:`~mlcal.metrics.segments.SegmentReportError`); None when neither is given."""
    if segments is not None and segment_columns is not None:
        raise ValueError("give segments or segment_columns, not both")
    if segment_columns is not None:
        if isinstance(segment_columns, str):
            segment_columns = [segment_columns]
        if not hasattr(X, "columns"):
            raise ValueError("segment_columns needs the features as a pandas DataFrame; pass "
                             "the keys themselves as segments=")
        segments = segment_keys(X, segment_columns, what="the evaluation features")
    return segments


def check_segments(segments, n: int, min_segment_rows: float) -> None:
    """Validate segment keys before any fitting or logging: the same checks as
    :func:`~mlcal.metrics.segments.segment_report` (lengths, missing keys, a segment of at least
    ``min_segment_rows`` rows) on a placeholder forecast."""
    segment_report(np.zeros(n), np.full(n, 0.5), segments, min_segment_rows=min_segment_rows)
