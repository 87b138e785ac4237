"""The ``calibration`` evaluator: calibration metrics and a reliability diagram for binary
classifiers, logged with a prefix so they never collide with MLflow's built-in metrics.

Multiclass models (K >= 3 classes: a raw model whose ``classes_`` has K labels, e.g. an mlcal
``CalibratedModel`` or a scikit-learn classifier, or a pyfunc output with ``proba_<class>``
columns, as the mlcal flavour gives) get ``<prefix>{top_label_ece, classwise_ece,
multiclass_brier, log_loss, accuracy}`` and one reliability diagram per class plus the
top-label diagram (``<prefix>reliability_class<k>_<label>.png``,
``<prefix>reliability_top_label.png``).

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
from mlflow.models.evaluation.artifacts import ImageEvaluationArtifact
from mlflow.utils.time import get_current_time_millis

from mlcal.base_models.scores import check_not_labels, read_scores
from mlcal.labels import DEFAULT_MIN_ROWS, binary_labels, multiclass_labels
from mlcal.metrics import calibration_diagnostics, compute_all
from mlcal.metrics.multiclass import multiclass_metrics
from mlcal.plotting import plot_multiclass_reliability
from mlcal.plotting import reliability_diagram
from mlcal.plotting.corp import corp_reliability_diagram, plot_multiclass_corp_reliability

PROBA_PREFIX = "proba_"   # the mlcal flavour's multiclass columns (mlcal.mlflow.flavor)

DEFAULT_CONFIG = {"n_bins": 10, "strategy": "uniform", "metric_prefix": "calibration_",
                  "pos_label": None, "probability_column": "p_calibrated",
                  "min_rows": DEFAULT_MIN_ROWS}


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
        p, classes = _positive_probability(model, dataset.features_data, static,
                                           config["probability_column"])
        check_not_labels(p, "the evaluated model", hint=(
            "the calibration evaluator needs probabilities: set evaluator_config "
            "probability_column to the model's probability output"))
        if p.ndim == 2:
            return _evaluate_multiclass(dataset.labels_data, p, classes, config, run_id)
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
        return EvaluationResult(metrics=metrics, artifacts=artifacts, run_id=run_id)


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


def _evaluate_multiclass(labels, p, classes, config, run_id) -> EvaluationResult:
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
    return EvaluationResult(metrics=metrics, artifacts=artifacts, run_id=run_id)
