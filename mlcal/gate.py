"""Deprecated location of the promotion policy, now :mod:`mlcal.mlflow.gate_policy`. Kept so
old imports keep working; it warns once on import."""

import warnings

from mlcal.mlflow.gate_policy import *  # noqa: F401,F403
from mlcal.mlflow.gate_policy import LOGGED_KEYS, Criterion, GatePolicy  # noqa: F401

warnings.warn("mlcal.gate moved to mlcal.mlflow.gate_policy", DeprecationWarning, stacklevel=2)
