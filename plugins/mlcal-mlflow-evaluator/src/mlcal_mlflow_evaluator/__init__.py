"""MLflow model-evaluator plugin ``calibration`` backed by :mod:`mlcal.metrics`."""

from mlcal_mlflow_evaluator.evaluator import CalibrationEvaluator

__all__ = ["CalibrationEvaluator"]
