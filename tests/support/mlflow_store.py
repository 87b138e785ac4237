"""A real MLflow sqlite tracking store for a whole test module, leaving no global state behind."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import mlflow

# environment variables MLflow's fluent API may set while a store is active
_MLFLOW_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID")


@contextmanager
def sqlite_store(root: Path, experiment: str, artifacts: str = "a") -> Iterator[str]:
    """Track into ``root/mlflow.db`` with ``experiment`` (artifacts under ``root/artifacts``)
    as the active experiment; yields the tracking URI. On exit the previous tracking URI, the
    active experiment and the MLflow environment variables are restored, so that other test
    modules see no trace of this store."""
    previous = mlflow.get_tracking_uri()
    saved_env = {k: os.environ.get(k) for k in _MLFLOW_ENV}
    uri = f"sqlite:///{root / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    exp = mlflow.create_experiment(experiment, artifact_location=(root / artifacts).as_uri())
    mlflow.set_experiment(experiment_id=exp)
    try:
        yield uri
    finally:
        mlflow.set_tracking_uri(previous)
        mlflow.tracking.fluent._active_experiment_id = None
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
