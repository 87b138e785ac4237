"""The ``calibration`` evaluator: calibration metrics and a reliability diagram for binary
classifiers, logged with a prefix so they never collide with MLflow's built-in metrics."""

from __future__ import annotations

import os
import tempfile

import numpy as np
from mlflow import MlflowClient
from mlflow.entities import Metric
from mlflow.models.evaluation import EvaluationResult, ModelEvaluator
from mlflow.models.evaluation.artifacts import ImageEvaluationArtifact
from mlflow.utils.time import get_current_time_millis

from mlcal.base_scores import check_not_labels, read_scores
from mlcal.labels import DEFAULT_MIN_ROWS, binary_labels
from mlcal.metrics import calibration_diagnostics, compute_all
from mlcal.plotting import reliability_diagram

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
        return read_scores(raw, features, "predict_proba"), getattr(raw, "classes_", None)
    out = model.predict(features)
    if hasattr(out, "columns"):
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
        y = _labels01(dataset.labels_data, classes, config["pos_label"], config["min_rows"])
        values = compute_all(y, p, int(config["n_bins"]), config["strategy"])
        values.update(calibration_diagnostics(y, p))
        prefix = config["metric_prefix"]
        metrics = {f"{prefix}{k}": float(v) for k, v in values.items() if np.isfinite(v)}
        client = MlflowClient()
        now = get_current_time_millis()
        client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()])
        artifacts = {}
        with tempfile.TemporaryDirectory() as tmp:
            name = f"{prefix}reliability_diagram"
            path = os.path.join(tmp, f"{name}.png")
            reliability_diagram(y, p, n_bins=int(config["n_bins"]), strategy=config["strategy"],
                                labels=("model",), path=path)
            client.log_artifact(run_id, path)
            uri = client.get_run(run_id).info.artifact_uri.rstrip("/") + f"/{name}.png"
            artifacts[name] = ImageEvaluationArtifact(uri=uri)
        return EvaluationResult(metrics=metrics, artifacts=artifacts, run_id=run_id)
