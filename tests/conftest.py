"""Shared fixtures."""

import pytest


@pytest.fixture()
def sqlite_tracking(tmp_path, monkeypatch):
    """A real MLflow sqlite tracking/registry store in a temp dir, with an experiment whose
    artifacts also live there (never ./mlruns). Yields the tracking URI."""
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    mlflow.create_experiment("tests", artifact_location=(tmp_path / "artifacts").as_uri())
    mlflow.set_experiment("tests")
    yield uri
    mlflow.set_tracking_uri(None)
