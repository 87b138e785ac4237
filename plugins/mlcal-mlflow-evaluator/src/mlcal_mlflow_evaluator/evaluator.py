"""The ``calibration`` evaluator: calibration metrics and a reliability diagram for binary
classifiers, logged with a prefix so they never collide with MLflow's built-in metrics.

Multiclass models (K >= 3 classes: a raw model whose ``classes_`` has K labels, e.g. an mlcal
``CalibratedModel`` or a scikit-learn classifier, or a pyfunc output with ``proba_<class>``
columns, as the mlcal flavour gives) get ``<prefix>{top_label_ece, classwise_ece,
multiclass_brier, log_loss, accuracy}`` and one reliability diagram per class plus the
top-label diagram (``<prefix>reliability_class<k>_<label>.png``,
``<prefix>reliability_top_label.png``).

With ``evaluator_config={"segment_columns": [...]}`` (columns of the evaluation data; a
composite key when several) both also log the per-segment metrics of
:func:`mlcal.metrics.segment_report`: the run metrics of
:func:`mlcal.metrics.segments.worst_segment_metrics` (``<prefix>segment_worst_citl``,
``_citl_lower``, ``_citl_upper``, ``_citl_excess``, ``_ece``, ``_log_loss``, ``_brier``,
``_rows``, ``<prefix>segment_max_ece``, ``<prefix>segment_count``,
``<prefix>segment_eligible_count``) and the artifacts ``<prefix>segment_report.json`` and
``.csv``; ``min_segment_rows`` (default 100) sets the smallest segment that may be the worst.
Segment columns that the model's input signature does not name are not passed to the model.

Both also log ``<prefix>reliability_corp.png``: the CORP reliability diagram (isotonic curve)
with its consistency band (:mod:`mlcal.plotting.corp`; multiclass: top label and every class). Their labels must hold every class; with the pyfunc
output the labels are matched to the column names as strings.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
from mlflow import MlflowClient
from mlflow.entities import Metric
from mlflow.models.evaluation import EvaluationResult, ModelEvaluator
from mlflow.models.evaluation.artifacts import (CsvEvaluationArtifact, ImageEvaluationArtifact,
                                                JsonEvaluationArtifact)
from mlflow.utils.time import get_current_time_millis

from mlcal.base_models.scores import check_not_labels, read_scores
from mlcal.labels import DEFAULT_MIN_ROWS, binary_labels, multiclass_labels
from mlcal.metrics import calibration_diagnostics, compute_all
from mlcal.metrics.multiclass import multiclass_metrics
from mlcal.plotting import plot_multiclass_reliability
from mlcal.plotting import reliability_diagram
from mlcal.plotting.corp import corp_reliability_diagram, plot_multiclass_corp_reliability
from mlcal.metrics.segments import (DEFAULT_MIN_SEGMENT_ROWS, segment_keys, segment_report,
                                   worst_segment_metrics, write_segment_artifacts)

PROBA_PREFIX = "proba_"   # the mlcal flavour's multiclass columns (mlcal.mlflow.flavor)

DEFAULT_CONFIG = {"n_bins": 10, "strategy": "uniform", "metric_prefix": "calibration_",
                  "pos_label": None, "probability_column": "p_calibrated",
                  "min_rows": DEFAULT_MIN_ROWS, "segment_columns": None,
                  "min_segment_rows": DEFAULT_MIN_SEGMENT_ROWS}


def _positive_probability(model, features, predictions, column: str):
    """P(positive) in order of preference: static predictions, the raw model's predict_proba,
    then a probability column of the pyfunc output. Returns (p, classes or None)."""
    if predictions is not None:
        return np.asarray(predictions, dtype=np.float64).reshape(-1), None
    raw = None
    try:
        raw = model.get_raw_model()
    except Exception:  # not every flavour exposes its raw model
        raw = None
    if raw is not None and hasattr(raw, "predict_proba"):
        classes = getattr(raw, "classes_", None)
        if classes is not None and len(classes) > 2:
            return np.asarray(raw.predict_proba(features), dtype=np.float64), classes
        return read_scores(raw, features, "predict_proba"), classes
    out = model.predict(features)
    if hasattr(out, "columns"):
        proba = [c for c in out.columns if str(c).startswith(PROBA_PREFIX)]
        if len(proba) > 2:   # multiclass: one probability column per class
            names = np.asarray([str(c)[len(PROBA_PREFIX):] for c in proba], dtype=object)
            return out[proba].to_numpy(dtype=np.float64), names
        if column not in out.columns:
            raise ValueError(f"model output has no probability column {column!r} (columns "
                             f"{list(out.columns)}); set evaluator_config probability_column")
        out = out[column]
    return np.asarray(out, dtype=np.float64).reshape(-1), None


def _labels01(labels, classes, pos_label, min_rows: int) -> np.ndarray:
    """0/1 labels; refuses missing labels, labels outside the model's classes, one class and
    too few rows (see :func:`mlcal.labels.binary_labels`)."""
    if classes is None and pos_label is not None:
        y = np.asarray(labels, dtype=object).reshape(-1)
        classes = [next((v for v in y if v != pos_label), None), pos_label]
        if classes[0] is None:
            classes = None  # a single class: binary_labels says so
    return binary_labels(labels, classes=None if classes is None else list(classes),
                         pos_label=pos_label, min_rows=int(min_rows), name="evaluation labels")


class CalibrationEvaluator(ModelEvaluator):
    """Logs ``<prefix>{ece,mce,brier,rmse,log_loss,auc,accuracy}``, the estimators of
    :data:`mlcal.metrics.DIAGNOSTIC_NAMES` and a reliability diagram."""

    @classmethod
    def can_evaluate(cls, *, model_type, evaluator_config, **kwargs) -> bool:
        return model_type == "classifier"

    def evaluate(self, *, model_type, dataset, run_id, evaluator_config, model=None,
                 extra_metrics=None, custom_artifacts=None, predictions=None, **kwargs):
        config = {**DEFAULT_CONFIG, **(evaluator_config or {})}
        static = dataset.predictions_data if dataset.predictions_data is not None else None
        if model is None and static is None:
            raise ValueError("the calibration evaluator needs a model or static predictions")
        features, segments = _split_segments(model, dataset.features_data,
                                             config["segment_columns"])
        p, classes = _positive_probability(model, features, static,
                                           config["probability_column"])
        check_not_labels(p, "the evaluated model", hint=(
            "the calibration evaluator needs probabilities: set evaluator_config "
            "probability_column to the model's probability output"))
        if p.ndim == 2:
            return _evaluate_multiclass(dataset.labels_data, p, classes, config, run_id,
                                        segments)
        y = _labels01(dataset.labels_data, classes, config["pos_label"], config["min_rows"])
        values = compute_all(y, p, int(config["n_bins"]), config["strategy"])
        values.update(calibration_diagnostics(y, p))
        prefix = config["metric_prefix"]
        metrics = _log_metrics(run_id, prefix, values)
        with tempfile.TemporaryDirectory() as tmp:
            name = f"{prefix}reliability_diagram"
            reliability_diagram(y, p, n_bins=int(config["n_bins"]), strategy=config["strategy"],
                                labels=("model",), path=os.path.join(tmp, f"{name}.png"))
            corp = f"{prefix}reliability_corp"
            corp_reliability_diagram(y, p, n_bins=int(config["n_bins"]),
                                     strategy=config["strategy"], labels=("model",),
                                     path=os.path.join(tmp, f"{corp}.png"))
            artifacts = _log_images(run_id, tmp, [name, corp])
        if segments is not None:
            seg_metrics, seg_artifacts = _log_segments(run_id, y, p, segments, config)
            metrics.update(seg_metrics)
            artifacts.update(seg_artifacts)
        return EvaluationResult(metrics=metrics, artifacts=artifacts, run_id=run_id)


def _split_segments(model, features, columns):
    """(model input, segment keys or None): the keys are the ``segment_columns`` of the
    evaluation features; those the model's input signature does not name are dropped from the
    model input (a segment-only column must not reach the model)."""
    if not columns:
        return features, None
    if isinstance(columns, str):
        columns = [columns]
    if not hasattr(features, "columns"):
        raise ValueError("evaluator_config segment_columns needs the evaluation data as a "
                         "pandas DataFrame with those columns")
    keys = segment_keys(features, list(columns), what="the evaluation data")
    names = set()
    sig = getattr(getattr(model, "metadata", None), "signature", None)
    if sig is not None and sig.inputs is not None and sig.inputs.has_input_names():
        names = set(sig.inputs.input_names())
    return features.drop(columns=[c for c in keys.columns if c not in names]), keys


def _log_segments(run_id: str, y, p, segments, config) -> tuple[dict, dict]:
    """Per-segment metrics of ``p`` (top-label for a matrix): the worst segment's run metrics
    and the JSON/CSV table artifacts."""
    prefix = config["metric_prefix"]
    rep = segment_report(y, p, segments, min_segment_rows=config["min_segment_rows"],
                         n_bins=int(config["n_bins"]), strategy=config["strategy"])
    values = worst_segment_metrics(rep)
    metrics = _log_metrics(run_id, prefix, values)
    client = MlflowClient()
    base = client.get_run(run_id).info.artifact_uri.rstrip("/")
    with tempfile.TemporaryDirectory() as tmp:
        for path in write_segment_artifacts(rep, tmp, f"{prefix}segment_report"):
            client.log_artifact(run_id, path)
    name = f"{prefix}segment_report"
    return metrics, {f"{name}_json": JsonEvaluationArtifact(uri=f"{base}/{name}.json"),
                     f"{name}_csv": CsvEvaluationArtifact(uri=f"{base}/{name}.csv")}


def _log_metrics(run_id: str, prefix: str, values: dict) -> dict[str, float]:
    metrics = {f"{prefix}{k}": float(v) for k, v in values.items() if np.isfinite(v)}
    now = get_current_time_millis()
    MlflowClient().log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()])
    return metrics


def _log_images(run_id: str, folder: str, names: list[str]) -> dict:
    """Log ``<folder>/<name>.png`` for each name; their evaluation artifacts by name."""
    client = MlflowClient()
    base = client.get_run(run_id).info.artifact_uri.rstrip("/")
    for name in names:
        client.log_artifact(run_id, os.path.join(folder, f"{name}.png"))
    return {name: ImageEvaluationArtifact(uri=f"{base}/{name}.png") for name in names}


def _evaluate_multiclass(labels, p, classes, config, run_id,
                         segments=None) -> EvaluationResult:
    """K >= 3 classes: multiclass metrics and per-class plus top-label diagrams."""
    if classes is None or len(classes) != p.shape[1]:
        raise ValueError(f"the model gives {p.shape[1]} probability columns but its classes "
                         "are unknown; evaluate a model that exposes classes_")
    raw = np.asarray(labels, dtype=object).reshape(-1)
    if np.asarray(classes).dtype.kind == "O" and all(isinstance(c, str) for c in classes):
        # class names read from pyfunc columns are strings: compare the labels' strings
        import pandas as pd

        raw = np.array([v if pd.isna(v) else str(v) for v in raw], dtype=object)
    y = multiclass_labels(raw, classes, min_rows=int(config["min_rows"]),
                          name="evaluation labels")
    n_bins, strategy, prefix = int(config["n_bins"]), config["strategy"], config["metric_prefix"]
    metrics = _log_metrics(run_id, prefix, multiclass_metrics(y, p, n_bins, strategy))
    with tempfile.TemporaryDirectory() as tmp:
        name = f"{prefix}reliability_multiclass"
        plot_multiclass_reliability(y, p, class_names=[str(c) for c in classes],
                                    n_bins=n_bins, strategy=strategy, labels=("model",),
                                    path=os.path.join(tmp, f"{name}.png"))
        corp = f"{prefix}reliability_corp"
        plot_multiclass_corp_reliability(y, p, class_names=[str(c) for c in classes],
                                         n_bins=n_bins, strategy=strategy, labels=("model",),
                                         path=os.path.join(tmp, f"{corp}.png"))
        artifacts = _log_images(run_id, tmp, [name, corp])
    if segments is not None:   # top-label per segment
        seg_metrics, seg_artifacts = _log_segments(run_id, y, p, segments, config)
        metrics.update(seg_metrics)
        artifacts.update(seg_artifacts)
    return EvaluationResult(metrics=metrics, artifacts=artifacts, run_id=run_id)
