"""Fit several calibrators on one calibration split and compare them on a test split.

Shared by ``mlcal demo`` and the MLflow quickstart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable

from mlcal.base_models.scores import classes_of, naive_probability, read_scores
from mlcal.calibrators.catalog import available_calibrators
from mlcal.labels import positive_indicator
from mlcal.metrics import METRIC_NAMES, compute_all
from mlcal.model import CalibratedModel


@dataclass
class ComparisonRow:
    """Test-set metrics of one calibrated model (``method`` None for the base model)."""

    method: str | None
    metrics: dict[str, float]
    fit_seconds: float = 0.0
    map_kind: str = ""
    map_size: int = 0
    model: CalibratedModel | None = field(default=None, repr=False)


def compare_calibrators(base_estimator, X_cal, y_cal, X_test, y_test,
                        methods: Iterable[str] | None = None, *, n_bins: int = 10,
                        strategy: str = "uniform") -> list[ComparisonRow]:
    """Calibrate a fitted classifier with each method and score it on held-out data.

    The first row is the uncalibrated base model (``predict_proba[:, 1]``, or the sigmoid of its
    decision function). Fit times cover the calibrator fit only.
    """
    rows = []
    source = CalibratedModel(base_estimator)._resolve_source()  # the score the models read
    base_p = naive_probability(read_scores(base_estimator, X_test, source), source)
    y_pos = positive_indicator(y_test, classes_of(base_estimator), name="y_test")
    rows.append(ComparisonRow(None, compute_all(y_pos, base_p, n_bins, strategy)))
    for name in (methods or available_calibrators()):
        start = time.perf_counter()
        model = CalibratedModel(base_estimator, name).fit(X_cal, y_cal)
        elapsed = time.perf_counter() - start
        m = model.calibrator_.map_
        rows.append(ComparisonRow(name, compute_all(y_pos, model.predict_proba(X_test)[:, 1],
                                                    n_bins, strategy),
                                  elapsed, m.kind, m.size, model))
    return rows


def format_comparison(rows: list[ComparisonRow]) -> str:
    """The comparison as a fixed-width table, one row per method."""
    head = f"{'method':<12}{'map':<8}{'size':>6}{'fit ms':>9}" + "".join(
        f"{m:>10}" for m in METRIC_NAMES)
    lines = [head, "-" * len(head)]
    for r in rows:
        name = r.method or "(base)"
        fit = f"{1000 * r.fit_seconds:9.1f}" if r.method else f"{'':>9}"
        size = f"{r.map_size:>6}" if r.method else f"{'':>6}"
        lines.append(f"{name:<12}{r.map_kind:<8}{size}{fit}"
                     + "".join(f"{r.metrics[m]:>10.4f}" for m in METRIC_NAMES))
    return "\n".join(lines)
