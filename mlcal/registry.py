"""Deprecated location of the promotion gate, now :mod:`mlcal.mlflow.gate` (next to the MLflow
flavour it works with). Kept so old imports keep working; it warns once on import."""

import warnings

from mlcal.mlflow.gate import *  # noqa: F401,F403
from mlcal.mlflow.gate import DEFAULT_METRIC_KEY, GateDecision  # noqa: F401

warnings.warn("mlcal.registry moved to mlcal.mlflow.gate", DeprecationWarning, stacklevel=2)
